"""DLedger 0.3.1.2's wire protocol over RocketMQ remoting: request codes,
response codes, and the JSON bodies of each request and response.

A request is a RemotingCommand with the DLedger code and the JSON body.  The
answer is a response command whose remoting code is ``Code.SUCCESS`` (200,
``DLedgerRpcNettyService.handleResponse``) whatever the outcome: the JSON
body's own ``code`` decides, and a reader looks at nothing else.

Bodies are written as fastjson writes the Java classes (``JSON.toJSONBytes``
with its default features): every getter of the class, names in alphabetical
order, null values left out, enums by name, ``byte[]`` as base64, a
``HashMap`` in the order Java iterates it.  Each response builder below gives
exactly the fields the matching Java code path sets, so that a Java peer and
an rmq peer read the same bytes from either."""

from __future__ import annotations

from enum import IntEnum

import orjson

from rmq.dledger.entry import Entry


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


def _fastjson(value):
    """``value`` with its dict keys in fastjson's order and its nulls dropped."""
    if isinstance(value, JavaHashMap):
        return {k: _fastjson(v) for k, v in value.items() if v is not None}
    if isinstance(value, dict):
        return {k: _fastjson(value[k]) for k in sorted(value) if value[k] is not None}
    if isinstance(value, list):
        return [_fastjson(v) for v in value]
    return value


def encode(obj: dict) -> bytes:
    """A request or response body, byte for byte as DLedger 0.3.1.2 writes it."""
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


def base(group: str, local_id: str | None, remote_id: str, leader_id: str | None, term: int,
         code: int = Code.SUCCESS) -> dict:
    """RequestOrResponse's fields (a null id is left out, as fastjson does)."""
    return {"code": int(code), "group": group, "localId": local_id, "remoteId": remote_id,
            "term": term, "leaderId": leader_id}


_BASE = ("group", "localId", "remoteId", "leaderId", "term", "code")


def reply_to(request: dict, code: int | None = None, term: int | None = None,
             **fields) -> dict:
    """A response made with ``copyBaseInfo(request)`` (its code included),
    then ``code``, ``term`` and ``fields`` set on it."""
    obj = {k: request.get(k) for k in _BASE}
    if code is not None or obj["code"] is None:
        obj["code"] = int(Code.SUCCESS if code is None else code)
    if term is not None:
        obj["term"] = term
    obj.update(fields)
    return obj


# The fields a response class adds to RequestOrResponse, at their Java
# defaults: fastjson writes them even on a refusal.
_RESPONSE_DEFAULTS: dict[int, dict] = {
    RequestCode.VOTE: {"voteResult": VoteResult.UNKNOWN},
    RequestCode.PUSH: {"beginIndex": 0, "endIndex": 0, "count": 0},
    RequestCode.APPEND: {"index": -1, "pos": -1},
    RequestCode.GET: {"entries": []},
}


def failure(request: dict, code: int, leader_id: str | None, request_code: int) -> dict:
    """What a DLedgerServer handler answers on a DLedgerException (a wrong
    remoteId or group, NOT_LEADER...): a new response of the request's type
    with the request's base info, the code and this node's leader."""
    return reply_to(request, code, leaderId=leader_id,
                    **_RESPONSE_DEFAULTS.get(request_code, {}))


def bare(code: int = Code.SUCCESS, term: int = -1) -> dict:
    """``new HeartBeatResponse()`` / ``new LeadershipTransferResponse()`` with
    ``term()`` and ``code()`` set: nothing else."""
    return {"code": int(code), "term": term}


def push_response(request: dict, code: int, begin_index: int, end_index: int) -> dict:
    """``EntryHandler.buildResponse``: group, code, the request's term, the
    follower's begin and end index; index and count unless a COMMIT."""
    obj = {"group": request.get("group"), "code": int(code), "term": request.get("term", -1),
           "beginIndex": begin_index, "endIndex": end_index, "count": 0}
    if request.get("type") != PushType.COMMIT:
        obj["index"] = push_first_index(request)
        obj["count"] = push_count(request)
    return obj


def append_response(group: str, term: int, leader_id: str | None, code: int = Code.SUCCESS,
                    index: int = -1, pos: int = -1) -> dict:
    """An AppendEntryResponse the entry pusher completes (committed, or
    WAIT_QUORUM_ACK_TIMEOUT, LEADER_PENDING_FULL...)."""
    return {"code": int(code), "group": group, "term": term, "leaderId": leader_id,
            "index": index, "pos": pos}


def push_first_index(request: dict) -> int:
    batch = request.get("batchEntry") or []
    if batch:
        return int(batch[0].get("index", -1))
    entry = request.get("entry")
    return int(entry.get("index", -1)) if entry else -1


def push_count(request: dict) -> int:
    batch = request.get("batchEntry") or []
    return len(batch) if batch else (1 if request.get("entry") else 0)


def push_request(group: str, local_id: str, remote_id: str, leader_id: str, term: int,
                 push_type: str, commit_index: int, entry: Entry | None = None,
                 batch: list[Entry] | None = None) -> dict:
    """PushEntryRequest with the getters fastjson writes (firstEntryIndex, count...)."""
    obj = base(group, local_id, remote_id, leader_id, term)
    entries = batch or []
    obj.update(type=push_type, commitIndex=commit_index, batch=bool(entries),
               batchEntry=[e.to_json_obj() for e in entries],
               totalSize=sum(e.compute_size() for e in entries))
    if entry is not None:
        obj["entry"] = entry.to_json_obj()
    first = entries[0].index if entries else entry.index if entry is not None else -1
    last = entries[-1].index if entries else entry.index if entry is not None else -1
    obj.update(firstEntryIndex=first, lastEntryIndex=last,
               count=len(entries) if entries else (1 if entry is not None else 0))
    return obj


def push_entries(request: dict) -> list[Entry]:
    """The entries a PushEntryRequest carries, batch or single."""
    batch = request.get("batchEntry") or []
    if batch:
        return [Entry.from_json_obj(e) for e in batch]
    entry = request.get("entry")
    return [Entry.from_json_obj(entry)] if entry else []
