"""DLedger 0.3.1.2's wire protocol over RocketMQ remoting: request codes,
response codes, and the JSON form of the bodies (their typed classes are in
``messages``).

A request is a RemotingCommand with the DLedger code and the JSON body.  The
answer is a response command whose remoting code is ``Code.SUCCESS`` (200,
``DLedgerRpcNettyService.handleResponse``) whatever the outcome: the JSON
body's own ``code`` decides, and a reader looks at nothing else.

Bodies are written as fastjson writes the Java classes (``JSON.toJSONBytes``
with its default features): every getter of the class, names in alphabetical
order, null values left out, enums by name, ``byte[]`` as base64, a
``HashMap`` in the order Java iterates it.  Each response built in
``messages`` has exactly the fields the matching Java code path sets, so
that a Java peer and an rmq peer read the same bytes from either."""

from __future__ import annotations

from enum import IntEnum

import orjson


class RequestCode(IntEnum):
    METADATA = 50000
    APPEND = 50001
    GET = 50002
    VOTE = 51001
    HEART_BEAT = 51002
    PULL = 51003
    PUSH = 51004
    LEADERSHIP_TRANSFER = 51005


class Code(IntEnum):
    """DLedgerResponseCode."""

    UNKNOWN = -1
    SUCCESS = 200
    TIMEOUT = 300
    METADATA_ERROR = 301
    NETWORK_ERROR = 302
    UNSUPPORTED = 303
    UNKNOWN_GROUP = 400
    UNKNOWN_MEMBER = 401
    UNEXPECTED_MEMBER = 402
    EXPIRED_TERM = 403
    NOT_LEADER = 404
    NOT_FOLLOWER = 405
    INCONSISTENT_STATE = 406
    INCONSISTENT_TERM = 407
    INCONSISTENT_INDEX = 408
    INCONSISTENT_LEADER = 409
    INDEX_OUT_OF_RANGE = 410
    UNEXPECTED_ARGUMENT = 411
    REPEATED_REQUEST = 412
    REPEATED_PUSH = 413
    DISK_ERROR = 414
    DISK_FULL = 415
    TERM_NOT_READY = 416
    FALL_BEHIND_TOO_MUCH = 417
    TAKE_LEADERSHIP_FAILED = 418
    INDEX_LESS_THAN_LOCAL_BEGIN = 419
    REQUEST_WITH_EMPTY_BODYS = 420
    PUSH_REQUEST_IS_FULL = 421
    INTERNAL_ERROR = 500
    TERM_CHANGED = 501
    WAIT_QUORUM_ACK_TIMEOUT = 502
    LEADER_PENDING_FULL = 503
    ILLEGAL_MEMBER_STATE = 504
    LEADER_NOT_READY = 505
    LEADER_TRANSFERRING = 506


class DLedgerError(Exception):
    """A DLedger failure with its response code."""

    def __init__(self, code: Code, message: str = "") -> None:
        super().__init__(f"{code.name}{': ' + message if message else ''}")
        self.code = code


class VoteResult:
    UNKNOWN = "UNKNOWN"
    ACCEPT = "ACCEPT"
    REJECT_UNKNOWN_LEADER = "REJECT_UNKNOWN_LEADER"
    REJECT_UNEXPECTED_LEADER = "REJECT_UNEXPECTED_LEADER"
    REJECT_EXPIRED_VOTE_TERM = "REJECT_EXPIRED_VOTE_TERM"
    REJECT_ALREADY_VOTED = "REJECT_ALREADY_VOTED"
    REJECT_ALREADY_HAS_LEADER = "REJECT_ALREADY_HAS_LEADER"
    REJECT_TERM_NOT_READY = "REJECT_TERM_NOT_READY"
    REJECT_TERM_SMALL_THAN_LEDGER = "REJECT_TERM_SMALL_THAN_LEDGER"
    REJECT_EXPIRED_LEDGER_TERM = "REJECT_EXPIRED_LEDGER_TERM"
    REJECT_SMALL_LEDGER_END_INDEX = "REJECT_SMALL_LEDGER_END_INDEX"
    REJECT_TAKING_LEADERSHIP = "REJECT_TAKING_LEADERSHIP"


class PushType:
    APPEND = "APPEND"
    COMMIT = "COMMIT"
    COMPARE = "COMPARE"
    TRUNCATE = "TRUNCATE"


class JavaHashMap(dict):
    """A ``Map<String, String>`` written in the order a ``java.util.HashMap``
    iterates it (MetadataResponse.peers): by bucket of the spread String
    hash, then insertion order within a bucket."""

    def __init__(self, items: dict[str, str]) -> None:
        capacity = 16
        while len(items) > capacity * 3 // 4:
            capacity *= 2
        keys = list(items)
        order = sorted(range(len(keys)), key=lambda i: (_bucket(keys[i], capacity), i))
        super().__init__((keys[i], items[keys[i]]) for i in order)


def _java_string_hash(text: str) -> int:
    """``String.hashCode`` (over UTF-16 code units), as an unsigned 32-bit value."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def _bucket(key: str, capacity: int) -> int:
    h = _java_string_hash(key)
    return (h ^ (h >> 16)) & (capacity - 1)


class Ordered(dict):
    """A JSON object built with its keys in fastjson's order and no nulls (an
    entry of a push): written as it is, not walked again."""

    __slots__ = ()


def _fastjson(value):
    """``value`` with its dict keys in fastjson's order and its nulls dropped."""
    if type(value) is Ordered:
        return value
    if isinstance(value, JavaHashMap):
        return {k: _fastjson(v) for k, v in value.items() if v is not None}
    if isinstance(value, dict):
        return {k: _fastjson(value[k]) for k in sorted(value) if value[k] is not None}
    if isinstance(value, list):
        return [_fastjson(v) for v in value]
    return value


def encode(obj) -> bytes:
    """A request or response body (a ``messages`` object, or its JSON object),
    byte for byte as DLedger 0.3.1.2 writes it."""
    if not isinstance(obj, dict):
        obj = obj.to_json()
    return orjson.dumps(_fastjson(obj))


def decode(body: bytes | None) -> dict:
    """A body read the way fastjson binds it: any field order, unknown fields
    ignored; ValueError when it is not a JSON object."""
    obj = orjson.loads(bytes(body or b""))
    if not isinstance(obj, dict):
        raise ValueError("a DLedger body must be a JSON object")
    return obj


def read_answer(peer: str, response) -> dict:
    """The DLedger answer a response RemotingCommand carries in its body:
    the body alone decides, whatever the remoting code."""
    if response.body:
        try:
            return decode(response.body)
        except ValueError:
            pass
    raise DLedgerError(Code.NETWORK_ERROR, f"{peer} answered {response.code} "
                       f"{response.remark or ''} without a DLedger body")
