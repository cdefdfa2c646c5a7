"""What a Java broker, client or tool computes, computed the same way: the
one home of rmq's Java-compatible helpers.

* ``String.hashCode`` (tag codes, subscription code sets, queue selectors)
  and the index-key hash of the index files (STORE_FORMAT.md 7.2);
* ``java.util.HashMap`` iteration order (property strings, ACL checks);
* ``Object.hashCode`` of the selector arguments users pass;
* ``LanguageCode`` and ``MQVersion`` names;
* which consumer groups count as system groups, by the Java class that asks
  (they do not all agree, and rmq answers as each of them does).

The compiled hot paths in ``rmq._fast`` hash in C; their parity tests compare
them with these functions.
"""

from __future__ import annotations

import functools
from typing import Any

from rmq.common import topics as T
from rmq.common.codes import CURRENT_VERSION, LanguageCode

# --- String.hashCode ---------------------------------------------------------


def string_hash(s: str) -> int:
    """Java ``String.hashCode`` as a signed 32-bit int.

    Java hashes UTF-16 code units, so characters outside the BMP count twice.
    """
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def ascii_hash_update(h: int, data: bytes) -> int:
    """``String.hashCode`` carried on from the unsigned 32-bit ``h`` over
    ASCII ``data`` (one byte, one UTF-16 unit), still unsigned."""
    for c in data:
        h = (h * 31 + c) & 0xFFFFFFFF
    return h


def signed32(h: int) -> int:
    """An unsigned 32-bit value read as Java's ``int``."""
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def index_key_hash(key: str) -> int:
    """The index files' ``keyHash``: ``abs(key.hashCode())``, 0 for
    ``Integer.MIN_VALUE`` (STORE_FORMAT.md 7.2)."""
    h = abs(string_hash(key))
    return 0 if h > 0x7FFFFFFF else h


def index_key_hash_ascii(topic_hash: int, key: bytes) -> int:
    """``index_key_hash(topic + "#" + key)`` for ASCII text, from the
    topic's unsigned hash (``ascii_hash_update(0, topic)``): one topic, many
    keys."""
    h = signed32(ascii_hash_update((topic_hash * 31 + 35) & 0xFFFFFFFF, key))
    return 0 if h == -2147483648 else abs(h)


def object_hash(arg: Any) -> int:
    """Java ``Object.hashCode`` for the argument types users pass to a queue
    selector: String, Boolean, Integer, Long (anything else: Python's hash)."""
    if isinstance(arg, str):
        return string_hash(arg)
    if isinstance(arg, bool):
        return 1231 if arg else 1237
    if isinstance(arg, int):
        if -(1 << 31) <= arg < (1 << 31):
            return arg
        v = arg & 0xFFFF_FFFF_FFFF_FFFF
        h = (v ^ (v >> 32)) & 0xFFFF_FFFF
        return h - (1 << 32) if h & 0x8000_0000 else h
    return hash(arg)


# --- java.util.HashMap -------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def hashmap_hash(key: str) -> int:
    """``HashMap.hash(key)``: the string hash with its high half folded in."""
    h = string_hash(key) & 0xFFFFFFFF
    return h ^ (h >> 16)


@functools.lru_cache(maxsize=4096)
def hashmap_order(keys: tuple[str, ...]) -> tuple[str, ...]:
    """The non-null keys of a HashMap holding ``keys`` (insertion order) in
    its iteration order: by bucket of a table of 16 doubling while size >
    0.75 x capacity, insertion order within a bucket.  The order depends only
    on the key sequence, so it is cached: callers repeat the same keys."""
    cap = 16
    while len(keys) > cap * 3 // 4:
        cap *= 2
    mask = cap - 1
    return tuple(sorted((k for k in keys if k is not None),
                        key=lambda k: hashmap_hash(k) & mask))


# --- LanguageCode and MQVersion names ------------------------------------------

LANGUAGE_NAMES: tuple[str, ...] = tuple(code.name for code in LanguageCode)
LANGUAGE_OTHER = int(LanguageCode.OTHER)


def language_name(language: int) -> str:
    """The ``LanguageCode`` name of a code, ``OTHER`` for codes Java lacks."""
    if 0 <= language < len(LANGUAGE_NAMES):
        return LANGUAGE_NAMES[language]
    return "OTHER"


VERSION_NAMES = {0: "V3_0_0_SNAPSHOT", 28: "V3_0_7_SNAPSHOT", 37: "V3_0_11",
                 62: "V3_1_8_SNAPSHOT", 121: "V3_4_9", 213: "V4_0_0", 232: "V4_1_0_SNAPSHOT",
                 333: "V4_6_0", 355: "V4_7_1", 373: "V4_8_0", 393: "V4_9_0", 401: "V4_9_4",
                 407: "V4_9_7", CURRENT_VERSION: "V4_9_8"}


def version_desc(version: int) -> str:
    """``MQVersion.getVersionDesc`` for the ordinals PROTOCOL.md 1.9 names."""
    if version >= 612:
        return "HIGHER_VERSION"
    return VERSION_NAMES.get(version, f"VERSION_{version}")


CURRENT_VERSION_DESC = version_desc(CURRENT_VERSION)  # "V4_9_8"


# --- system consumer groups ----------------------------------------------------

# SubscriptionGroupManager's built-in groups (created when the table is new).
BUILTIN_GROUPS: tuple[str, ...] = (
    T.TOOLS_CONSUMER_GROUP,
    T.FILTERSRV_CONSUMER_GROUP,
    T.SELF_TEST_CONSUMER_GROUP,
    T.ONS_HTTP_PROXY_GROUP,
    T.CID_ONSAPI_PULL_GROUP,
    T.CID_ONSAPI_PERMISSION_GROUP,
    T.CID_ONSAPI_OWNER_GROUP,
)

# DefaultMQAdminExtImpl.SYSTEM_GROUP_SET (what the admin tools leave out).
ADMIN_SYSTEM_GROUPS = frozenset({
    T.DEFAULT_CONSUMER_GROUP, T.DEFAULT_PRODUCER_GROUP, T.TOOLS_CONSUMER_GROUP,
    T.FILTERSRV_CONSUMER_GROUP, T.MONITOR_CONSUMER_GROUP, T.CLIENT_INNER_PRODUCER_GROUP,
    T.SELF_TEST_PRODUCER_GROUP, T.SELF_TEST_CONSUMER_GROUP, T.ONS_HTTP_PROXY_GROUP,
    T.CID_ONSAPI_PERMISSION_GROUP, T.CID_ONSAPI_OWNER_GROUP, T.CID_ONSAPI_PULL_GROUP,
    T.TRANS_SYS_CONSUMER_GROUP})

# The RocketMQ dashboard's system groups (its consumer list marks them).
DASHBOARD_SYSTEM_GROUPS = frozenset({
    T.TOOLS_CONSUMER_GROUP, T.FILTERSRV_CONSUMER_GROUP, T.SELF_TEST_CONSUMER_GROUP,
    T.ONS_HTTP_PROXY_GROUP, T.CID_ONSAPI_PERMISSION_GROUP, T.CID_ONSAPI_OWNER_GROUP,
    T.CID_ONSAPI_PULL_GROUP, T.TRANS_SYS_CONSUMER_GROUP, T.SCHEDULE_CONSUMER_GROUP})


def is_sys_consumer_group(group: str) -> bool:
    """``MixAll.isSysConsumerGroup``: the ``CID_RMQ_SYS_`` prefix."""
    return group.startswith(T.CID_RMQ_SYS_PREFIX)


def is_builtin_group(group: str) -> bool:
    """A group the broker makes itself: built in, or a system consumer group."""
    return group in BUILTIN_GROUPS or is_sys_consumer_group(group)


def is_admin_system_group(group: str) -> bool:
    """A group the admin tools treat as the system's (their set, or the prefix)."""
    return group in ADMIN_SYSTEM_GROUPS or is_sys_consumer_group(group)


def is_dashboard_system_group(group: str) -> bool:
    """A group the dashboard shows as a system group (its set, or the prefix)."""
    return group in DASHBOARD_SYSTEM_GROUPS or is_sys_consumer_group(group)
