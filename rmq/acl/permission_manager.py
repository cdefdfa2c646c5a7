"""The rules in force and their changes (RocketMQ ``PlainPermissionManager``).

Rules come from ``plain_acl.yml`` and ``conf/acl/**.yml`` (``plain_config``).
Each file is parsed and checked on its own; the rules in force are the last
good rules of every file, combined in file order (an accessKey defined in two
files counts in the first only, as in 4.9.8).

* ``load()`` at start-up: every file must be valid, or AclException names the
  file and the problem (the broker does not start: 4.9.8 would run with ACL
  silently off).
* ``reload()`` on a change seen by the file watcher: a file that changed and
  does not parse is reported in the log and its last good rules stay in force;
  the other files' changes apply.  A removed file's rules go.
* The admin updates (UPDATE_AND_CREATE_ACL_CONFIG, DELETE_ACL_CONFIG,
  UPDATE_GLOBAL_WHITE_ADDRS_CONFIG) check the change, rewrite the yml file with
  its ``dataVersion`` + 1 and reload it at once.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os

from rmq.acl import permission as P
from rmq.acl import plain_config as C
from rmq.acl.access_resource import PlainAccessResource, describe
from rmq.acl.errors import AclException
from rmq.acl.plain_config import AclFileRules, PlainAccessConfig, PlainAccount
from rmq.acl.remote_address import RemoteAddressStrategy, remote_address_strategy
from rmq.acl.signer import SIGNATURE, UNIQUE_MSG_QUERY_FLAG, cal_signature
from rmq.common.data_version import DataVersion
from rmq.common.java import hashmap_order
from rmq.common.topics import TRACE_TOPIC, is_retry_topic

log = logging.getLogger("RocketmqCommon")

_WITHOUT_SIGNATURE = frozenset({SIGNATURE})


def _file_digest(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha1(f.read()).digest()
    except OSError:
        return None


class PlainPermissionManager:
    """Plain ACL rules of one broker, read from ``home``'s conf directory."""

    def __init__(self, home: str, plain_file: str = "conf/plain_acl.yml") -> None:
        self.home = os.path.normpath(os.path.abspath(home))
        self.acl_dir = os.path.join(self.home, "conf", "acl")
        self.default_file = os.path.normpath(os.path.join(self.home, plain_file))
        self._files: dict[str, AclFileRules] = {}  # path -> last good rules
        self._digests: dict[str, bytes | None] = {}  # path -> digest of what was parsed
        self._accounts: dict[str, tuple[str, PlainAccount]] = {}  # accessKey -> (file, account)
        self._white: list[RemoteAddressStrategy] = []
        self._default_version = DataVersion()  # of the default file (the ``version`` field)

    # ---- loading ------------------------------------------------------------------
    def file_list(self) -> list[str]:
        """The ACL files now on disk, in the order their rules combine."""
        return C.list_acl_files(self.acl_dir, self.default_file)

    def _ensure_default_file(self) -> None:
        """``assureAclConfigFilesExist``: an empty default file (and its directory)
        when there is none."""
        if os.path.exists(self.default_file):
            return
        try:
            os.makedirs(os.path.dirname(self.default_file), exist_ok=True)
            with open(self.default_file, "x"):
                pass
        except FileExistsError:
            pass
        except OSError as e:
            raise AclException(f"Error in creating {self.default_file}: "
                               f"{e.strerror or e}") from None

    def load(self) -> None:
        """Read every file; AclException (nothing changed) if one is not valid."""
        self._ensure_default_file()
        files: dict[str, AclFileRules] = {}
        digests: dict[str, bytes | None] = {}
        for path in self.file_list():
            digests[path] = _file_digest(path)
            files[path] = C.load_rules(path)
        self._files, self._digests = files, digests
        self._combine()

    def reload(self) -> None:
        """Apply what changed on disk (files whose bytes differ from what was
        parsed, new files, removed files).  A file that does not parse keeps
        its last good rules, with an error in the log."""
        current = self.file_list()
        files = {p: r for p, r in self._files.items() if p in current}
        for path in current:
            digest = _file_digest(path)
            if path in self._files and digest == self._digests.get(path):
                continue
            try:
                files[path] = C.load_rules(path)
            except AclException as e:
                log.error("ACL file %s not applied, the rules it had before stay in force: %s",
                          path, e)
                continue
            self._digests[path] = digest
            log.info("ACL file %s (re)loaded: %d accounts, %d global white addresses", path,
                     len(files[path].accounts), len(files[path].white))
        for gone in set(self._files) - set(current):
            log.info("ACL file %s removed: its rules no longer apply", gone)
            self._digests.pop(gone, None)
        self._files = files
        self._combine()

    def _combine(self) -> None:
        accounts: dict[str, tuple[str, PlainAccount]] = {}
        white: list[RemoteAddressStrategy] = []
        listed = {p: i for i, p in enumerate(self.file_list())}
        for path in sorted(self._files, key=lambda p: listed.get(p, len(listed))):
            rules = self._files[path]
            white.extend(rules.white)
            for account in rules.accounts:
                if account.access_key in accounts:
                    log.warning("The accessKey %s is repeated in multiple ACL files (%s wins)",
                                account.access_key, accounts[account.access_key][0])
                    continue
                accounts[account.access_key] = (path, account)
        default = self._files.get(self.default_file)
        if default is not None and default.data_version is not None:
            self._default_version.assign_new_one(default.data_version)
        self._accounts, self._white = accounts, white

    # ---- validation ---------------------------------------------------------------
    def validate(self, resource: PlainAccessResource) -> None:
        """``PlainPermissionManager.validate``: returns when the request may go
        on, raises AclException with 4.9.8's message when it may not."""
        ip = resource.remote_ip
        for strategy in self._white:
            if strategy.match(ip):
                return
        ak = resource.access_key
        if ak is None:
            raise AclException("No accessKey is configured")
        entry = self._accounts.get(ak)
        if entry is None:
            raise AclException(f"No acl config for {ak}")
        owned = entry[1]
        if owned.address.match(ip):
            return
        if not self._signature_ok(resource, owned.secret_key):
            raise AclException(f"Check signature failed for accessKey={ak}")
        needed = resource.resources
        if needed is not None and needed.get(TRACE_TOPIC) == P.PUB:
            return  # message trace is never refused
        self.check_perm(resource, owned)

    def secret_key(self, access_key: str) -> str | None:
        """The secret key of an account (None: no such account), for callers that
        authenticate a request signed another way (the 5.x gRPC endpoint)."""
        entry = self._accounts.get(access_key)
        return None if entry is None else entry[1].secret_key

    @staticmethod
    def _signature_ok(resource: PlainAccessResource, secret_key: str) -> bool:
        ext = resource.ext_fields
        signature = resource.signature
        if ext is None or signature is None:
            return False
        expected = cal_signature(ext, resource.body, secret_key)
        if hmac.compare_digest(expected, signature):
            return True
        # a 4.9.8 Java client signs _UNIQUE_KEY_QUERY too (QUERY_MESSAGE)
        return UNIQUE_MSG_QUERY_FLAG in ext and hmac.compare_digest(
            cal_signature(ext, resource.body, secret_key, _WITHOUT_SIGNATURE), signature)

    @staticmethod
    def check_perm(resource: PlainAccessResource, owned: PlainAccount) -> None:
        """``checkPerm``: admin-only codes, then each needed resource against the
        account's explicit permission or its default one (in Java HashMap
        order, so that the resource named in a refusal is the same)."""
        if P.need_admin_perm(resource.request_code) and not owned.admin:
            raise AclException(f"Need admin permission for request code="
                               f"{resource.request_code}, but accessKey={owned.access_key} "
                               f"is not")
        needed = resource.resources
        if needed is None:
            return
        owned_perms = owned.resource_perms
        if owned_perms is None and owned.admin:
            return
        names = hashmap_order(tuple(needed)) if len(needed) > 1 else needed
        for name in names:
            perm = owned_perms.get(name) if owned_perms is not None else None
            if perm is None:
                perm = owned.default_group_perm if is_retry_topic(name) else \
                    owned.default_topic_perm
            if not P.check_permission(needed[name], perm):
                raise AclException(f"No default permission for {describe(name)}")

    # ---- what the admin codes read ------------------------------------------------
    def data_version_map(self) -> dict[str, DataVersion]:
        """Every file with data -> its DataVersion (``getDataVersionMap``)."""
        return {p: r.data_version for p, r in self._files.items() if r.data_version is not None}

    def default_data_version(self) -> DataVersion:
        """The default file's DataVersion (the deprecated ``version`` field)."""
        return self._default_version

    def all_acl_config(self) -> tuple[list[str], list[PlainAccessConfig]]:
        """The global white addresses and the accounts in force (``getAllAclConfig``)."""
        white: list[str] = []
        for path in self.file_list():
            rules = self._files.get(path)
            if rules is not None:
                white.extend(rules.white_patterns)
        configs = [self._config_of(path, ak) for ak, (path, _acc) in self._accounts.items()]
        return white, configs

    def _config_of(self, path: str, access_key: str) -> PlainAccessConfig:
        return next(c for c in self._files[path].configs if c.accessKey == access_key)

    # ---- admin updates ------------------------------------------------------------
    def _write(self, path: str, data: dict) -> None:
        C.next_file_version(data)
        C.write_rules(path, data)
        self.reload()

    def update_access_config(self, config: PlainAccessConfig) -> bool:
        """``updateAccessConfig``: create or change an account; it stays in the
        file that holds it, a new one goes to the default file."""
        C.check_keys(config)
        P.check_resource_perms(config.topicPerms)
        P.check_resource_perms(config.groupPerms)
        PlainAccount.build(config)  # the address pattern too, before anything is written
        entry = self._accounts.get(config.accessKey)
        path = entry[0] if entry is not None else self.default_file
        if entry is None:
            self._ensure_default_file()
        data = C.read_mapping(path) or {}
        accounts = data.get(C.ACCOUNTS)
        if not isinstance(accounts, list):
            accounts = []
        existing = None
        for account in accounts:
            if isinstance(account, dict) and str(account.get("accessKey")) == config.accessKey:
                existing = account
                accounts.remove(account)
                break
        accounts.append(account_map(existing, config))
        data[C.ACCOUNTS] = accounts
        self._write(path, data)
        return True

    def delete_access_config(self, access_key: str | None) -> bool:
        """``deleteAccessConfig``: False when the key is empty or unknown."""
        if not access_key:
            log.error("Parameter value accesskey is null or empty String, please check your "
                      "parameter")
            return False
        entry = self._accounts.get(access_key)
        if entry is None:
            return False
        path = entry[0]
        data = C.read_mapping(path)
        if not data:
            log.warning("No data found in %s when deleting access config of %s", path,
                        access_key)
            return True
        accounts = data.get(C.ACCOUNTS)
        for account in accounts if isinstance(accounts, list) else ():
            if isinstance(account, dict) and str(account.get("accessKey")) == access_key:
                accounts.remove(account)
                self._write(path, data)
                return True
        return False

    def update_global_white_addrs(self, addresses: list[str] | None,
                                  path: str | None = None) -> bool:
        """``updateGlobalWhiteAddrsConfig`` of one ACL file (the default one
        when ``path`` is empty).  Only a file the broker reads its rules from
        may be written (4.9.8 takes any file under ROCKETMQ_HOME, broker.conf
        included); the patterns are checked before anything is written."""
        if addresses is None:
            log.error("Parameter value globalWhiteAddrsList is null, please check your "
                      "parameter")
            return False
        path = os.path.normpath(os.path.abspath(path)) if path else self.default_file
        if not os.path.isfile(path):
            log.error("Parameter value %s is not exist or is a directory, please check your "
                      "parameter", path)
            return False
        if path not in self.file_list():
            log.error("Parameter value %s is not an ACL configuration file of this broker",
                      path)
            return False
        for pattern in addresses:
            remote_address_strategy(pattern)
        data = C.read_mapping(path) or {}
        data[C.GLOBAL_WHITE_ADDRS] = list(addresses)
        self._write(path, data)
        return True


def account_map(existing: dict | None, config: PlainAccessConfig) -> dict:
    """``createAclAccessConfigMap``: the account as written to the file
    (an existing entry keeps its order and the keys the update leaves out)."""
    out = existing if existing is not None else {}
    ak = config.accessKey
    if not ak or len(ak) <= C.KEY_MIN_LENGTH:
        raise AclException(f"The accessKey={ak} cannot be null and length should longer than 6")
    out["accessKey"] = ak
    if config.secretKey:
        if len(config.secretKey) <= C.KEY_MIN_LENGTH:
            raise AclException(f"The secretKey={config.secretKey} value length should longer "
                               f"than 6")
        out["secretKey"] = config.secretKey
    if config.whiteRemoteAddress is not None:
        out["whiteRemoteAddress"] = config.whiteRemoteAddress
    out["admin"] = config.admin
    if config.defaultTopicPerm:
        out["defaultTopicPerm"] = config.defaultTopicPerm
    if config.defaultGroupPerm:
        out["defaultGroupPerm"] = config.defaultGroupPerm
    if config.topicPerms is not None:
        out["topicPerms"] = list(config.topicPerms)
    if config.groupPerms is not None:
        out["groupPerms"] = list(config.groupPerms)
    return out
