"""``rmq-admin`` name-server commands of mqadmin 4.9.8 not in ``rmq.tools.admin``:
``addWritePerm`` (``AddWritePermSubCommand``) and ``updateNamesrvConfig``
(``UpdateNamesrvConfigCommand``).  Tables print mqadmin's lines."""

from __future__ import annotations

import argparse

from rmq.client.admin import MQAdmin
from rmq.client.exceptions import MQClientError
from rmq.common.codes import RequestCode
from rmq.common.properties import format_properties
from rmq.common.protocol.headers_namesrv import (
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
)
from rmq.remoting.exceptions import RemotingError
from rmq.tools.admin_base import CommandTable, Output

NAMESRV_COMMANDS = CommandTable()


@NAMESRV_COMMANDS.command(
    "addWritePerm", "Add write perm of broker in all name server you defined in the -n param",
    lambda p: p.add_argument("-b", "--brokerName", required=True, help="broker name"))
async def add_write_perm(admin: MQAdmin, ns: argparse.Namespace) -> Output:
    """Every name server is asked; one that fails is reported and the rest still
    are (as mqadmin), then the command exits 1."""
    name = ns.brokerName.strip()
    rows, lines, failed = [], [], []
    for addr in admin.config.namesrv_list():
        try:
            resp = await admin.api.call(addr, RequestCode.ADD_WRITE_PERM_OF_BROKER,
                                        AddWritePermOfBrokerRequestHeader(brokerName=name))
        except (MQClientError, RemotingError) as e:
            failed.append(f"{addr}: {e}")
            lines.append(f"add write perm of broker[{name}] in name server[{addr}] Failed")
            rows.append({"namesrv": addr, "brokerName": name, "error": str(e)})
            continue
        count = resp.decode_header(AddWritePermOfBrokerResponseHeader).addTopicCount
        lines.append(f"add write perm of broker[{name}] in name server[{addr}] OK, {count}")
        rows.append({"namesrv": addr, "brokerName": name, "addTopicCount": count})
    error = f"failed on {len(failed)} name server(s): {'; '.join(failed)}" if failed else None
    return Output(rows, "\n".join(lines), error)


@NAMESRV_COMMANDS.command("updateNamesrvConfig", "Update configs of name server.", lambda p: (
    p.add_argument("-k", "--key", required=True, help="config key"),
    p.add_argument("-v", "--value", required=True, help="config value")))
async def update_namesrv_config(admin: MQAdmin, ns: argparse.Namespace) -> Output:
    """Sent to every name server of ``-n``; any refusal fails the command
    (``MQClientAPIImpl.updateNameServerConfig``)."""
    key, value = ns.key.strip(), ns.value.strip()
    if not key:
        raise MQClientError(-1, "the config key is empty")
    body = format_properties({key: value}).encode("utf-8")
    servers = admin.config.namesrv_list()
    for addr in servers:
        await admin.api.call(addr, RequestCode.UPDATE_NAMESRV_CONFIG, None, body)
    listed = "[" + ", ".join(servers) + "]"
    return Output({"namesrv": servers, "key": key, "value": value},
                  f"update name server config success!{listed}\n{key} : {value}")
