"""Permissions of plain ACL (RocketMQ ``Permission`` and ``AclConstants``).

A permission is a bit set: DENY=1, ANY=2, PUB=4, SUB=8.  A rule's text is one
of ``PUB``, ``SUB``, ``PUB|SUB``, ``SUB|PUB`` or ``DENY``; anything else, or
no text at all, means DENY.  ``topicPerms`` entries read ``topic=PERM``,
``groupPerms`` entries ``group=PERM``; a group is held under its retry topic
``%RETRY%<group>`` so that one map answers for topics and groups alike.
"""

from __future__ import annotations

from rmq.acl.errors import AclException
from rmq.common.codes import RequestCode
from rmq.common.topics import RETRY_GROUP_TOPIC_PREFIX

DENY = 1
ANY = 1 << 1
PUB = 1 << 2
SUB = 1 << 3

_BY_TEXT = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}

# Codes only an account with ``admin: true`` may send (4.9.8's list; the ACL
# codes 50-53 are not on it in 4.9.8 either).  GET_BROKER_CLUSTER_ACL_CONFIG
# returns every secret key: rmq serves that code (4.9.8 no longer does) to
# admin accounts only.
ADMIN_CODES = frozenset({
    RequestCode.UPDATE_AND_CREATE_TOPIC,
    RequestCode.UPDATE_BROKER_CONFIG,
    RequestCode.DELETE_TOPIC_IN_BROKER,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    RequestCode.DELETE_SUBSCRIPTIONGROUP,
    RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG,
})


def need_admin_perm(code: int) -> bool:
    return code in ADMIN_CODES


def check_permission(needed: int, owned: int) -> bool:
    """``Permission.checkPermission``: DENY wins; ANY wants PUB or SUB."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def parse_perm(text: str | None) -> int:
    """``Permission.parsePermFromString``: unknown or absent text is DENY."""
    if text is None:
        return DENY
    return _BY_TEXT.get(text.strip(), DENY)


def perm_text(perm: int) -> str:
    """The rule text of a permission bit set (for listings)."""
    if perm & DENY:
        return "DENY"
    if perm & PUB and perm & SUB:
        return "PUB|SUB"
    return "PUB" if perm & PUB else "SUB" if perm & SUB else "DENY"


def split_tokens(text: str, sep: str) -> list[str]:
    """commons-lang ``StringUtils.split``: the pieces between separators,
    empty pieces dropped."""
    return [t for t in text.split(sep) if t]


def parse_resource_perms(entries: list[str] | None, is_topic: bool) -> dict[str, int]:
    """``Permission.parseResourcePerms``: ``name=PERM`` entries as a map of
    resource (topic, or ``%RETRY%group``) to permission."""
    out: dict[str, int] = {}
    for entry in entries or ():
        items = split_tokens(entry, "=") if isinstance(entry, str) else []
        if len(items) != 2:
            raise AclException(f"Parse resource permission failed for "
                               f"{'topic' if is_topic else 'group'}:{entry}")
        name = items[0].strip()
        out[name if is_topic else RETRY_GROUP_TOPIC_PREFIX + name] = parse_perm(items[1].strip())
    return out


def check_resource_perms(entries: list[str] | None) -> None:
    """``Permission.checkResourcePerms``: every entry ``Res=Perm`` with a known Perm
    (what an update through the admin codes must satisfy)."""
    for entry in entries or ():
        items = split_tokens(entry, "=")
        if len(items) != 2:
            raise AclException(f"Parse Resource format error for {entry}.\n"
                               "The expected resource format is 'Res=Perm'. For example: "
                               "topicA=SUB")
        perm = items[1].strip()
        if perm != "DENY" and parse_perm(perm) == DENY:
            raise AclException(f"Parse resource permission error for {entry}.\n"
                               "The expected permissions are 'SUB' or 'PUB' or 'SUB|PUB' or "
                               "'PUB|SUB'.")
