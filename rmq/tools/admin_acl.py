"""``rmq-admin``'s plain-ACL commands, with mqadmin 4.9.8's names and options:
``updateAclConfig``, ``deleteAclConfig`` (alias ``deleteAccessConfig``),
``updateGlobalWhiteAddr``, ``clusterAclConfigVersion``, and 4.9.3's
``getAccessConfigSubCommand`` (alias ``getAclConfig``): the rules a broker holds.

Signing: as mqadmin, rmq-admin signs every request with the ``accessKey`` /
``secretKey`` of ``$ROCKETMQ_HOME/conf/tools.yml`` when that file has both;
``--signAccessKey``/``--signSecretKey`` on the command line take precedence
(rmq's options: ``-a``/``--accessKey`` already name the account an ACL
command edits).
"""

from __future__ import annotations

import argparse
import os
from datetime import datetime

import yaml

from rmq.acl.plain_config import PlainAccessConfig
from rmq.acl.signer import SessionCredentials
from rmq.client.admin import MQAdmin
from rmq.client.exceptions import MQClientError

TOOLS_FILE = os.path.join("conf", "tools.yml")  # under ROCKETMQ_HOME (ACL_CONF_TOOLS_FILE)

# name -> (help, options, handler), merged into rmq-admin's command table
ACL_COMMANDS: dict = {}


def _command(name: str, help_text: str, args, aliases: tuple[str, ...] = ()):
    def deco(fn):
        for n in (name, *aliases):
            ACL_COMMANDS[n] = (help_text, args, fn)
        return fn
    return deco


def tool_credentials(access_key: str | None, secret_key: str | None,
                     home: str | None = None) -> SessionCredentials | None:
    """The keys to sign with: both given on the command line, else those of
    ``conf/tools.yml`` under ``home`` (ROCKETMQ_HOME), else none."""
    if access_key or secret_key:
        if not (access_key and secret_key):
            raise MQClientError(-1, "--signAccessKey and --signSecretKey go together")
        return SessionCredentials(access_key, secret_key)
    home = home if home is not None else os.environ.get("ROCKETMQ_HOME")
    if not home:
        return None
    path = os.path.join(home, TOOLS_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except FileNotFoundError:
        return None
    except (OSError, yaml.YAMLError) as e:
        raise MQClientError(-1, f"{path} cannot be read: {' '.join(str(e).split())}") from None
    if not isinstance(data, dict):
        return None
    ak, sk = data.get("accessKey"), data.get("secretKey")
    if ak is None or sk is None or not str(ak).strip() or not str(sk).strip():
        return None
    return SessionCredentials(str(ak), str(sk))


def credential_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--signAccessKey", help="sign requests with this access key (plain ACL); "
                   "default: accessKey of $ROCKETMQ_HOME/conf/tools.yml")
    p.add_argument("--signSecretKey", help="the secret key of --signAccessKey")


def _target(p: argparse.ArgumentParser, what: str) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("-b", "--brokerAddr", help=f"{what} which broker")
    g.add_argument("-c", "--clusterName", help=f"{what} which cluster")


async def _every_broker(admin: MQAdmin, ns: argparse.Namespace) -> list[str]:
    """-b, or every master and slave of -c (``fetchMasterAndSlaveAddrByClusterName``)."""
    if ns.brokerAddr:
        return [ns.brokerAddr.strip()]
    info = await admin.cluster_info()
    names = info.clusterAddrTable.get(ns.clusterName.strip())
    if names is None:
        raise MQClientError(-1, f"cluster {ns.clusterName} not found")
    return sorted(addr for name in sorted(names) if name in info.brokerAddrTable
                  for addr in info.brokerAddrTable[name].brokerAddrs.values())


async def _masters(admin: MQAdmin, ns: argparse.Namespace) -> list[str]:
    """-b, or every master of -c (``fetchMasterAddrByClusterName``)."""
    if ns.brokerAddr:
        return [ns.brokerAddr.strip()]
    return await admin.master_addrs(ns.clusterName.strip())


def _list(text: str | None) -> list[str] | None:
    return None if text is None else text.strip().split(",")


@_command("updateAclConfig", "Update acl config yaml file in broker", lambda p: (
    _target(p, "update acl config file to"),
    p.add_argument("-a", "--accessKey", dest="account_access_key", required=True,
                   metavar="ACCESSKEY", help="set accessKey in acl config file"),
    p.add_argument("-s", "--secretKey", dest="account_secret_key", required=True,
                   metavar="SECRETKEY", help="set secretKey in acl config file"),
    p.add_argument("-w", "--whiteRemoteAddress", help="set white ip Address for account"),
    p.add_argument("-i", "--defaultTopicPerm", help="set default topicPerm"),
    p.add_argument("-u", "--defaultGroupPerm", help="set default GroupPerm"),
    p.add_argument("-t", "--topicPerms", help="set topicPerms list,eg: topicA=DENY,topicD=SUB"),
    p.add_argument("-g", "--groupPerms", help="set groupPerms list,eg: groupD=DENY,groupD=SUB"),
    p.add_argument("-m", "--admin", help="set admin flag in acl config file")))
async def update_acl_config(admin: MQAdmin, ns: argparse.Namespace):
    config = PlainAccessConfig(
        ns.account_access_key.strip(), ns.account_secret_key.strip(),
        ns.whiteRemoteAddress.strip() if ns.whiteRemoteAddress is not None else None,
        ns.admin is not None and ns.admin.strip().lower() == "true",
        ns.defaultTopicPerm.strip() if ns.defaultTopicPerm else None,
        ns.defaultGroupPerm.strip() if ns.defaultGroupPerm else None,
        _list(ns.topicPerms), _list(ns.groupPerms))
    addrs = await _every_broker(admin, ns)
    for addr in addrs:
        await admin.acl.create_and_update_plain_access_config(addr, config)
    return [dict(broker=a, **config.to_json_obj()) for a in addrs]


@_command("deleteAclConfig", "Delete Acl Config Account in broker", lambda p: (
    _target(p, "delete acl config account from"),
    p.add_argument("-a", "--accessKey", dest="account_access_key", required=True,
                   metavar="ACCESSKEY", help="the accessKey of the account to delete")),
    aliases=("deleteAccessConfig",))
async def delete_acl_config(admin: MQAdmin, ns: argparse.Namespace):
    addrs = await _every_broker(admin, ns)
    ak = ns.account_access_key.strip()
    for addr in addrs:
        await admin.acl.delete_plain_access_config(addr, ak)
    return [{"broker": a, "deleted": ak} for a in addrs]


@_command("updateGlobalWhiteAddr", "Update global white address for acl Config File in broker",
          lambda p: (
              _target(p, "update global white address to"),
              p.add_argument("-g", "--globalWhiteRemoteAddresses", required=True,
                             help="set globalWhiteRemoteAddress list,eg: 10.10.103.*,192.168.0.*"),
              p.add_argument("-p", "--aclFileFullPath",
                             help="the acl file to update (default: the broker's plain_acl.yml)")))
async def update_global_white_addr(admin: MQAdmin, ns: argparse.Namespace):
    addrs = await _every_broker(admin, ns)
    white = ns.globalWhiteRemoteAddresses.strip()
    path = ns.aclFileFullPath.strip() if ns.aclFileFullPath else None
    for addr in addrs:
        await admin.acl.update_global_white_addr_config(addr, white, path)
    return [{"broker": a, "globalWhiteRemoteAddresses": white, "aclFileFullPath": path or ""}
            for a in addrs]


@_command("clusterAclConfigVersion", "List all of acl config version information in cluster",
          lambda p: _target(p, "query acl config version for"))
async def cluster_acl_config_version(admin: MQAdmin, ns: argparse.Namespace):
    rows = []
    for addr in await _masters(admin, ns):
        info = await admin.acl.examine_broker_cluster_acl_version_info(addr)
        for path, version in sorted(info.all_acl_config_data_version.items()):
            rows.append({"Cluster Name": info.cluster_name, "Broker Name": info.broker_name,
                         "Broker Addr": info.broker_addr, "AclFilePath": path,
                         "AclConfigVersionNum": version.counter,
                         "AclLastUpdateTime": datetime.fromtimestamp(
                             version.timestamp / 1000).strftime("%Y-%m-%d %H:%M:%S")})
    return rows


ACCOUNT_COLUMNS = ("accessKey", "secretKey", "whiteRemoteAddress", "admin", "defaultTopicPerm",
                   "defaultGroupPerm", "topicPerms", "groupPerms")


@_command("getAccessConfigSubCommand", "List all of acl config information in cluster",
          lambda p: _target(p, "query acl config of"), aliases=("getAclConfig",))
async def get_access_config(admin: MQAdmin, ns: argparse.Namespace):
    """One row per global white address and per account, for every broker."""
    rows = []
    for addr in await _masters(admin, ns):
        config = await admin.acl.examine_broker_cluster_acl_config(addr)
        for pattern in config.global_white_addrs:
            rows.append(_rule_row(addr, "globalWhiteRemoteAddress", {"whiteRemoteAddress": pattern}))
        for account in config.plain_access_configs:
            rows.append(_rule_row(addr, "account", account.to_json_obj()))
    return rows


def _rule_row(addr: str, rule: str, values: dict) -> dict:
    """Every row has every column (a table shows the first row's columns)."""
    return {"broker": addr, "rule": rule, **{c: values.get(c, "") for c in ACCOUNT_COLUMNS}}
