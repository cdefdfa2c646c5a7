"""The yml rule files of plain ACL: reading, checking and rewriting them
(RocketMQ ``PlainAccessConfig``, ``AclUtils.getYamlDataObject`` /
``writeDataObject`` and the file listing of ``PlainPermissionManager``).

Files: ``$ROCKETMQ_HOME/conf/plain_acl.yml`` (the broker setting
``aclPlainFile``, 4.9.8's ``-Drocketmq.acl.plain.file``) and every ``*.yml`` /
``*.yaml`` under ``$ROCKETMQ_HOME/conf/acl/``, sub-directories included.
One file::

    globalWhiteRemoteAddresses:        # patterns: a match needs no signature
      - 10.10.103.*
    accounts:
      - accessKey: RocketMQ            # longer than 6 characters
        secretKey: 12345678            # longer than 6 characters
        whiteRemoteAddress:            # a pattern: a match needs no signature
        admin: false
        defaultTopicPerm: DENY         # PUB, SUB, PUB|SUB, DENY (absent: DENY)
        defaultGroupPerm: SUB
        topicPerms: [topicA=DENY, topicB=PUB|SUB]
        groupPerms: [groupA=DENY, groupB=SUB]
    dataVersion:                       # written by the admin updates
      - counter: 1
        timestamp: 1700000000000

YAML 1.1 (PyYAML, as SnakeYAML in 4.9.8): ``secretKey: 12345678`` is a number
and is read as the text ``12345678``, as fastjson converts it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import yaml

from rmq.acl import permission as P
from rmq.acl.errors import AclException
from rmq.acl.remote_address import RemoteAddressStrategy, remote_address_strategy
from rmq.common.data_version import DataVersion

GLOBAL_WHITE_ADDRS = "globalWhiteRemoteAddresses"
ACCOUNTS = "accounts"
DATA_VERSION = "dataVersion"
KEY_MIN_LENGTH = 6  # an accessKey or secretKey must be longer than this

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _text(value: Any, what: str) -> str | None:
    """A scalar as Java text (fastjson's String conversion of a YAML value)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise AclException(f"{what} is not a single value: {value!r}")


def _flag(value: Any, what: str) -> bool:
    """fastjson's boolean conversion: true/false, 1/0 and their texts."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "y", "t"):
        return True
    if text in ("false", "0", "n", "f", ""):
        return False
    raise AclException(f"{what} is not a boolean: {value!r}")


def _texts(value: Any, what: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise AclException(f"{what} is not a list: {value!r}")
    return [_text(v, what) for v in value]


@dataclass(slots=True)
class PlainAccessConfig:
    """One account as written in a file or sent by UPDATE_AND_CREATE_ACL_CONFIG."""

    accessKey: str | None = None
    secretKey: str | None = None
    whiteRemoteAddress: str | None = None
    admin: bool = False
    defaultTopicPerm: str | None = None
    defaultGroupPerm: str | None = None
    topicPerms: list[str] | None = None
    groupPerms: list[str] | None = None

    @classmethod
    def from_yaml(cls, obj: Any) -> PlainAccessConfig:
        if not isinstance(obj, dict):
            raise AclException(f"an account is not a mapping: {obj!r}")
        return cls(_text(obj.get("accessKey"), "accessKey"),
                   _text(obj.get("secretKey"), "secretKey"),
                   _text(obj.get("whiteRemoteAddress"), "whiteRemoteAddress"),
                   _flag(obj.get("admin"), "admin"),
                   _text(obj.get("defaultTopicPerm"), "defaultTopicPerm"),
                   _text(obj.get("defaultGroupPerm"), "defaultGroupPerm"),
                   _texts(obj.get("topicPerms"), "topicPerms"),
                   _texts(obj.get("groupPerms"), "groupPerms"))

    def to_json_obj(self) -> dict[str, Any]:
        """fastjson's shape: properties in name order, nulls left out."""
        out = {"accessKey": self.accessKey, "admin": self.admin,
               "defaultGroupPerm": self.defaultGroupPerm,
               "defaultTopicPerm": self.defaultTopicPerm, "groupPerms": self.groupPerms,
               "secretKey": self.secretKey, "topicPerms": self.topicPerms,
               "whiteRemoteAddress": self.whiteRemoteAddress}
        return {k: v for k, v in out.items() if v is not None}


def check_keys(config: PlainAccessConfig) -> None:
    """``checkPlainAccessConfig``: both keys present and longer than 6."""
    ak, sk = config.accessKey, config.secretKey
    if ak is None or sk is None or len(ak) <= KEY_MIN_LENGTH or len(sk) <= KEY_MIN_LENGTH:
        raise AclException(f"The accessKey={_java(ak)} and secretKey={_java(sk)} cannot be null "
                           f"and length should longer than 6")


def _java(value: str | None) -> str:
    return "null" if value is None else value


@dataclass(slots=True)
class PlainAccount:
    """An account as the validator holds it (``buildPlainAccessResource``)."""

    access_key: str
    secret_key: str
    white_remote_address: str | None
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    resource_perms: dict[str, int] | None  # topic or %RETRY%group -> perm; None: none given
    address: RemoteAddressStrategy

    @classmethod
    def build(cls, config: PlainAccessConfig) -> PlainAccount:
        check_keys(config)
        perms = P.parse_resource_perms(config.groupPerms, False)
        perms.update(P.parse_resource_perms(config.topicPerms, True))
        return cls(config.accessKey, config.secretKey, config.whiteRemoteAddress, config.admin,
                   P.parse_perm(config.defaultTopicPerm), P.parse_perm(config.defaultGroupPerm),
                   perms or None, remote_address_strategy(config.whiteRemoteAddress))


@dataclass(slots=True)
class AclFileRules:
    """The rules of one file, parsed and checked.  ``data_version`` is None for
    a file without data (4.9.8 lists no version for it)."""

    path: str
    white_patterns: list[str] = field(default_factory=list)
    white: list[RemoteAddressStrategy] = field(default_factory=list)
    configs: list[PlainAccessConfig] = field(default_factory=list)
    accounts: list[PlainAccount] = field(default_factory=list)
    data_version: DataVersion | None = None


def load_yaml(stream: Any, path: str) -> Any:
    """The YAML document of ``stream`` (text or an open file); AclException
    naming ``path`` for anything that does not parse."""
    try:
        return yaml.load(stream, Loader=_Loader)  # noqa: S506 - a safe loader
    except yaml.MarkedYAMLError as e:
        where = e.problem_mark
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        raise AclException(f"{path} is not valid YAML: {e.problem}{at}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise AclException(f"{path} is not valid YAML: {' '.join(str(e).split())}") from None


def read_yaml(path: str) -> Any:
    """The file's YAML document; None when the file does not exist or is empty."""
    try:
        with open(path, encoding="utf-8") as f:
            return load_yaml(f, path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise AclException(f"{path} cannot be read: {e.strerror or e}") from None


def mapping_of(data: Any, path: str) -> dict | None:
    """A file's document as a mapping (None: no data); AclException otherwise."""
    if data is None:
        return None
    if not isinstance(data, dict):
        raise AclException(f"{path} does not hold a mapping at its top level")
    return data


def read_mapping(path: str) -> dict | None:
    """The file as a mapping (None: no data); AclException for anything else."""
    return mapping_of(read_yaml(path), path)


def data_version_of(data: dict) -> DataVersion:
    """The first ``dataVersion`` entry, or a new version (now, 0)."""
    versions = data.get(DATA_VERSION)
    if not versions:
        return DataVersion()
    if not isinstance(versions, list) or not isinstance(versions[0], dict):
        raise AclException(f"{DATA_VERSION} is not a list of counter/timestamp entries")
    try:
        return DataVersion.from_json_obj(versions[0])
    except ValueError as e:
        raise AclException(str(e)) from None


def parse_rules(path: str, data: dict | None) -> AclFileRules:
    """Check a file's data and build its rules (every account and pattern
    must be valid, or AclException names what is wrong)."""
    rules = AclFileRules(path)
    if not data:
        return rules
    patterns = data.get(GLOBAL_WHITE_ADDRS)
    if patterns is not None and not isinstance(patterns, list):
        raise AclException(f"{GLOBAL_WHITE_ADDRS} is not a list")
    for p in patterns or ():
        text = _text(p, GLOBAL_WHITE_ADDRS)
        rules.white_patterns.append(text)
        rules.white.append(remote_address_strategy(text))
    accounts = data.get(ACCOUNTS)
    if accounts is not None and not isinstance(accounts, list):
        raise AclException(f"{ACCOUNTS} is not a list")
    for obj in accounts or ():
        config = PlainAccessConfig.from_yaml(obj)
        rules.configs.append(config)
        rules.accounts.append(PlainAccount.build(config))
    rules.data_version = data_version_of(data)
    return rules


def load_rules(path: str) -> AclFileRules:
    """Read and check one file."""
    try:
        return parse_rules(path, read_mapping(path))
    except AclException as e:
        text = str(e)
        raise AclException(text if path in text else f"{path}: {text}") from None


def write_rules(path: str, data: dict) -> None:
    """Replace the file with ``data`` (block-style YAML as SnakeYAML's
    ``dumpAsMap``): written beside it and renamed over it, so that the file
    watcher never reads half a file; the file's mode is kept."""
    text = yaml.dump(data, Dumper=_Dumper, default_flow_style=False, sort_keys=False,
                     allow_unicode=True)
    tmp = f"{path}.tmp"
    try:
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as e:
        raise AclException(f"{path} cannot be written: {e.strerror or e}") from None


def next_file_version(data: dict) -> DataVersion:
    """``updateAclConfigFileVersion``: the file's version + 1, stored in ``data``."""
    version = data_version_of(data)
    version.next_version()
    data[DATA_VERSION] = [{"counter": version.counter, "timestamp": version.timestamp}]
    return version


def list_acl_files(acl_dir: str, default_file: str) -> list[str]:
    """Every ``.yml``/``.yaml`` under ``acl_dir`` (sorted, recursive), then the
    default file if it exists and is not among them."""
    found: list[str] = []
    if os.path.isdir(acl_dir):
        for root, dirs, files in os.walk(acl_dir):
            dirs.sort()
            found.extend(os.path.join(root, f) for f in sorted(files)
                         if f.endswith((".yml", ".yaml")))
    if os.path.isfile(default_file) and default_file not in found:
        found.append(default_file)
    return found
