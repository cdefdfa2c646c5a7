"""DLedger 0.3.1.2's wire protocol over RocketMQ remoting: request codes,
response codes, and the JSON bodies (fastjson's field names) of each request
and response.  A request is a RemotingCommand with the DLedger code and the
JSON body; the answer is a SUCCESS RemotingCommand whose JSON body carries
the DLedger response code in ``code``."""

from __future__ import annotations

from enum import IntEnum

from rmq.store.dledger.entry import Entry


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


def base(group: str, local_id: str, remote_id: str, leader_id: str | None, term: int,
         code: int = Code.SUCCESS) -> dict:
    """RequestOrResponse's fields (a null leaderId is left out, as fastjson does)."""
    obj = {"code": int(code), "group": group, "localId": local_id, "remoteId": remote_id,
           "term": term}
    if leader_id is not None:
        obj["leaderId"] = leader_id
    return obj


def reply_to(request: dict, code: int = Code.SUCCESS, term: int | None = None, **fields) -> dict:
    """A response copying the request's base fields (``copyBaseInfo``)."""
    obj = {k: request[k] for k in ("group", "localId", "remoteId", "leaderId", "term")
           if k in request}
    obj["code"] = int(code)
    if term is not None:
        obj["term"] = term
    obj.update(fields)
    return obj


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
