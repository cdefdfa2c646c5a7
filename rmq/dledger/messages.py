"""DLedger 0.3.1.2's request and response bodies as typed objects.

One class per Java class of ``io.openmessaging.storage.dledger.protocol``,
its fields under Python names; ``to_json`` gives the JSON object fastjson
writes for it (every getter, under the Java name; ``protocol.encode`` sorts
the names and leaves the nulls out) and ``from_json`` reads one as fastjson
binds it (any field order, unknown fields ignored, a missing field at its
Java default).  A field whose Java value is null until a code path sets it
is None here, so each response carries exactly the fields its path sets:
``new HeartBeatResponse()`` with a code and a term is two fields, a refusal
made by ``copyBaseInfo`` has the request's base fields too.
"""

from __future__ import annotations

import base64
import functools
from dataclasses import dataclass, field, fields

import orjson

from rmq._fast import compiled
from rmq.dledger.entry import Entry
from rmq.dledger.protocol import (
    Code,
    JavaHashMap,
    PushType,
    RequestCode,
    VoteResult,
    decode,
    encode,
)

# how a field's value goes to and from JSON, by its annotation
_INT, _STR, _BOOL, _BYTES, _ENTRY, _ENTRIES, _MAP = range(7)
_KINDS = {"int": _INT, "int | None": _INT, "str | None": _STR, "str": _STR, "bool": _BOOL,
          "bytes": _BYTES, "Entry | None": _ENTRY, "list[Entry]": _ENTRIES,
          "JavaHashMap | None": _MAP}


def _java_name(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


@dataclass(slots=True)
class RequestOrResponse:
    """The fields every request and response has (``RequestOrResponse``)."""

    group: str | None = None
    local_id: str | None = None
    remote_id: str | None = None
    leader_id: str | None = None
    term: int = -1
    code: int = Code.SUCCESS

    @classmethod
    def _layout(cls) -> list[tuple[str, str, int]]:
        """(Python name, Java name, kind) of each field, worked out once per class."""
        layout = _LAYOUTS.get(cls)
        if layout is None:
            layout = _LAYOUTS[cls] = [(f.name, _java_name(f.name), _KINDS[f.type])
                                      for f in fields(cls)]
        return layout

    def to_json(self) -> dict:
        obj = {}
        for name, java, kind in self._layout():
            value = getattr(self, name)
            if kind == _ENTRY and value is not None:
                value = value.to_json_obj()
            elif kind == _ENTRIES:
                value = [e.to_json_obj() for e in value]
            elif kind == _BYTES:
                value = base64.b64encode(value).decode()
            elif kind == _INT and value is not None:
                value = int(value)
            obj[java] = value
        return obj

    @classmethod
    def from_json(cls, obj: dict) -> RequestOrResponse:
        """The body read from a decoded JSON object; ValueError (or TypeError)
        when a field has a value of the wrong kind."""
        body = cls()
        for name, java, kind in cls._layout():
            value = obj.get(java)
            if value is None:
                continue
            if kind == _INT:
                value = int(value)
            elif kind == _ENTRY:
                value = Entry.from_json_obj(value)
            elif kind == _ENTRIES:
                value = [Entry.from_json_obj(e) for e in value]
            elif kind == _BYTES:
                value = base64.b64decode(value)
            elif kind == _MAP:
                value = dict(value)
            setattr(body, name, value)
        return body

    def __getitem__(self, java_name: str):
        """A field by its wire (Java) name, as the JSON object holds it."""
        return self.to_json()[java_name]

    def base_of(self) -> dict:
        """This body's base fields, for a response made with ``copyBaseInfo``."""
        return {"group": self.group, "local_id": self.local_id, "remote_id": self.remote_id,
                "leader_id": self.leader_id, "term": self.term, "code": self.code}


_LAYOUTS: dict[type, list[tuple[str, str, int]]] = {}


@dataclass(slots=True)
class HeartBeatRequest(RequestOrResponse):
    pass


@dataclass(slots=True)
class HeartBeatResponse(RequestOrResponse):
    pass


@dataclass(slots=True)
class VoteRequest(RequestOrResponse):
    ledger_end_index: int = -1
    ledger_end_term: int = -1


@dataclass(slots=True)
class VoteResponse(RequestOrResponse):
    vote_result: str = VoteResult.UNKNOWN


@dataclass(slots=True)
class MetadataRequest(RequestOrResponse):
    pass


@dataclass(slots=True)
class MetadataResponse(RequestOrResponse):
    peers: JavaHashMap | None = None


@dataclass(slots=True)
class AppendEntryRequest(RequestOrResponse):
    body: bytes = b""


@dataclass(slots=True)
class AppendEntryResponse(RequestOrResponse):
    index: int = -1
    pos: int = -1


@dataclass(slots=True)
class GetEntriesRequest(RequestOrResponse):
    begin_index: int = -1
    max_size: int = 0


@dataclass(slots=True)
class GetEntriesResponse(RequestOrResponse):
    entries: list[Entry] = field(default_factory=list)


@dataclass(slots=True)
class LeadershipTransferRequest(RequestOrResponse):
    take_leadership_ledger_index: int | None = None
    transfer_id: str | None = None
    transferee_id: str | None = None


@dataclass(slots=True)
class LeadershipTransferResponse(RequestOrResponse):
    pass


@dataclass(slots=True)
class PushEntryRequest(RequestOrResponse):
    """One entry (``entry``) or a batch (``batch_entry``); the getters fastjson
    writes besides (batch, count, first and last index, total size) follow
    from them."""

    type: str | None = None
    commit_index: int = -1
    entry: Entry | None = None
    batch_entry: list[Entry] = field(default_factory=list)

    def entries(self) -> list[Entry]:
        """The entries carried, batch or single."""
        if self.batch_entry:
            return self.batch_entry
        return [self.entry] if self.entry is not None else []

    def first_index(self) -> int:
        entries = self.entries()
        return entries[0].index if entries else -1

    def to_json(self) -> dict:
        obj = RequestOrResponse.to_json(self)
        batch = self.batch_entry
        entries = self.entries()
        obj.update(batch=bool(batch), totalSize=sum(e.compute_size() for e in batch),
                   firstEntryIndex=entries[0].index if entries else -1,
                   lastEntryIndex=entries[-1].index if entries else -1, count=len(entries))
        return obj


@dataclass(slots=True)
class PushEntryResponse(RequestOrResponse):
    index: int | None = None
    begin_index: int = 0
    end_index: int = 0
    count: int = 0


# the response class of each request code
RESPONSE_OF: dict[int, type[RequestOrResponse]] = {
    RequestCode.METADATA: MetadataResponse,
    RequestCode.APPEND: AppendEntryResponse,
    RequestCode.GET: GetEntriesResponse,
    RequestCode.VOTE: VoteResponse,
    RequestCode.HEART_BEAT: HeartBeatResponse,
    RequestCode.PUSH: PushEntryResponse,
    RequestCode.LEADERSHIP_TRANSFER: LeadershipTransferResponse,
}
# the request class of each request code a member serves
REQUEST_OF: dict[int, type[RequestOrResponse]] = {
    RequestCode.METADATA: MetadataRequest,
    RequestCode.APPEND: AppendEntryRequest,
    RequestCode.GET: GetEntriesRequest,
    RequestCode.VOTE: VoteRequest,
    RequestCode.HEART_BEAT: HeartBeatRequest,
    RequestCode.PUSH: PushEntryRequest,
    RequestCode.LEADERSHIP_TRANSFER: LeadershipTransferRequest,
}


def base(cls: type[RequestOrResponse], group: str, local_id: str | None, remote_id: str,
         leader_id: str | None, term: int, **extra) -> RequestOrResponse:
    """A request with its base fields set (a null id is left out, as fastjson does)."""
    return cls(group=group, local_id=local_id, remote_id=remote_id, leader_id=leader_id,
               term=term, **extra)


def reply_to(request: RequestOrResponse, cls: type[RequestOrResponse], code: int | None = None,
             term: int | None = None, **extra) -> RequestOrResponse:
    """A response made with ``copyBaseInfo(request)`` (its code included),
    then ``code``, ``term`` and ``extra`` set on it."""
    fields_ = request.base_of()
    if code is not None:
        fields_["code"] = int(code)
    if term is not None:
        fields_["term"] = term
    fields_.update(extra)
    return cls(**fields_)


def failure(request: RequestOrResponse, code: int, leader_id: str | None,
            request_code: int) -> RequestOrResponse:
    """What a DLedgerServer handler answers on a DLedgerException (a wrong
    remoteId or group, NOT_LEADER...): a new response of the request's type
    with the request's base info, the code and this node's leader (the
    response's own fields at their Java defaults, which fastjson writes)."""
    return reply_to(request, RESPONSE_OF.get(request_code, RequestOrResponse), code,
                    leader_id=leader_id)


def bare(cls: type[RequestOrResponse], code: int = Code.SUCCESS,
         term: int = -1) -> RequestOrResponse:
    """``new HeartBeatResponse()`` / ``new LeadershipTransferResponse()`` with
    ``term()`` and ``code()`` set: nothing else."""
    return cls(code=int(code), term=term)


def push_request(group: str, local_id: str, remote_id: str, leader_id: str, term: int,
                 push_type: str, commit_index: int, entry: Entry | None = None,
                 batch: list[Entry] | None = None) -> PushEntryRequest:
    return PushEntryRequest(group=group, local_id=local_id, remote_id=remote_id,
                            leader_id=leader_id, term=term, type=push_type,
                            commit_index=commit_index, entry=entry, batch_entry=batch or [])


def push_append_body(group: str, local_id: str | None, remote_id: str | None,
                     leader_id: str | None, term: int, commit_index: int, entries: list[Entry],
                     batch: bool) -> bytes:
    """``encode(push_request(..., APPEND, ...))`` byte for byte, built from
    each entry's JSON object (made once per entry, not once per push and
    follower) rather than through the generic JSON walk: ``batch`` puts
    ``entries`` in ``batchEntry``, else the one entry in ``entry``.  In one
    compiled pass when built (``rmq._fast.dledger_push.encode_push``)."""
    names, ids = _names(group, local_id, remote_id, leader_id)
    encode_push = _push_body if _push is None else _push.encode_push
    return encode_push(names, ids, term, commit_index, entries, batch)


@functools.lru_cache(maxsize=64)
def _names(group: str, local_id: str | None, remote_id: str | None,
           leader_id: str | None) -> tuple[bytes, bytes]:
    """A push's group as a JSON string and its id members (each with its
    comma), the same for every push of a leader to a follower."""
    return orjson.dumps(group), b"".join([b'"%b":%b,' % (key, orjson.dumps(value)) for key, value in (
        (b"leaderId", leader_id), (b"localId", local_id), (b"remoteId", remote_id))
        if value is not None])


def _push_body(group: bytes, ids: bytes, term: int, commit_index: int, entries: list[Entry],
               batch: bool) -> bytes:
    """Twin of ``rmq._fast.dledger_push.encode_push``: an APPEND push's bytes
    from the group's JSON string and the id members (``_names``)."""
    if batch:
        head = b'{"batch":true,"batchEntry":[%b],"code":200,"commitIndex":%d,"count":%d,' % (
            b",".join([e.json_bytes() for e in entries]), commit_index, len(entries))
        total = sum([e.compute_size() for e in entries])
    else:
        head = b'{"batch":false,"batchEntry":[],"code":200,"commitIndex":%d,"count":1,' \
            b'"entry":%b,' % (commit_index, entries[0].json_bytes())
        total = 0
    return head + b'"firstEntryIndex":%d,"group":%b,"lastEntryIndex":%d,%b"term":%d,' \
        b'"totalSize":%d,"type":"APPEND"}' % (entries[0].index, group, entries[-1].index, ids,
                                               term, total)


_push = compiled("dledger_push")


def read_push(body: bytes) -> PushEntryRequest:
    """A PUSH body read as ``PushEntryRequest.from_json(decode(body))`` reads
    it: in one compiled pass when built and the body is in the plain form
    leaders write (``rmq._fast.dledger_push``), else (the twin) by orjson
    and ``from_json``; ValueError or TypeError for a body that is not a push."""
    got = push_fields(body)
    if got is None:
        return PushEntryRequest.from_json(decode(body))
    return push_of_fields(got)


def push_fields(body: bytes) -> tuple | None:
    """``decode_push``'s fields of a PUSH body in the plain form leaders
    write: (group, localId, remoteId, leaderId, term, code, type,
    commitIndex, the entry row or None, the batch's rows), each row
    (index, term, body, pos, magic, channel, chainCrc, bodyCrc, size); None
    when not compiled or for any other body (``read_push`` reads those)."""
    return None if _push is None else _push.decode_push(body)


def push_of_fields(got: tuple) -> PushEntryRequest:
    """The request of ``push_fields``' fields, an ``Entry`` per row."""
    group, local_id, remote_id, leader_id, term, code, push_type, commit_index, one, batch = got
    return PushEntryRequest(group, local_id, remote_id, leader_id, term, code, push_type,
                            commit_index, None if one is None else Entry(*one),
                            [Entry(*row) for row in batch])


def push_answer(body) -> tuple[int, int, int | None] | None:
    """(code, term, index) of a follower's answer to an APPEND push, as
    ``PushEntryResponse.from_json(decode(body))`` reads them: in one compiled
    pass when built and the body is in the form DLedger writes
    (``rmq._fast.dledger_push.decode_push_answer``), else by the twin; None
    when the answer has no body or one that does not bind."""
    if _push is not None and body:
        got = _push.decode_push_answer(body)
        if got is not None:
            return got
    return _push_answer(body)


def _push_answer(body) -> tuple[int, int, int | None] | None:
    """The twin of ``decode_push_answer``: orjson and ``from_json``."""
    if not body:
        return None
    try:
        resp = PushEntryResponse.from_json(decode(body))
    except (ValueError, TypeError):
        return None
    return resp.code, resp.term, resp.index


# (code, term, index) of an answer in the form DLedger writes, else None
# (``push_answer`` then reads it): in one compiled pass when built
read_push_answer = _push_answer if _push is None else _push.decode_push_answer


def push_response(request: PushEntryRequest, code: int, begin_index: int,
                  end_index: int) -> PushEntryResponse:
    """``EntryHandler.buildResponse``: group, code, the request's term, the
    follower's begin and end index; index and count unless a COMMIT."""
    resp = PushEntryResponse(group=request.group, code=int(code), term=request.term,
                             begin_index=begin_index, end_index=end_index)
    if request.type != PushType.COMMIT:
        resp.index = request.first_index()
        resp.count = len(request.entries())
    return resp


def push_response_body(resp: RequestOrResponse) -> bytes:
    """``protocol.encode(resp)`` byte for byte; a follower's answer to a push
    (``push_response``: no ids, an ASCII group) written straight, without
    the generic walk of its fields."""
    if type(resp) is not PushEntryResponse or resp.local_id is not None or \
            resp.remote_id is not None or resp.leader_id is not None:
        return encode(resp)
    answer = push_answer_bytes(resp.group, resp.code, resp.term, resp.begin_index, resp.end_index,
                         resp.index, resp.count)
    return encode(resp) if answer is None else answer


def push_answer_bytes(group, code: int, term: int, begin_index: int, end_index: int,
                index: int | None, count: int) -> bytes | None:
    """The bytes of a follower's answer to a push (``push_response``'s
    fields), as ``protocol.encode`` writes them; None for a group not in
    plain printable ASCII (``encode`` escapes it)."""
    if type(group) is not str or not group.isascii() or '"' in group or "\\" in group or \
            not group.isprintable():
        return None
    at = b"" if index is None else b'"index":%d,' % index
    return b'{"beginIndex":%d,"code":%d,"count":%d,"endIndex":%d,"group":"%b",%b"term":%d}' % (
        begin_index, code, count, end_index, group.encode(), at, term)


def append_response(group: str, term: int, leader_id: str | None, code: int = Code.SUCCESS,
                    index: int = -1, pos: int = -1) -> AppendEntryResponse:
    """An AppendEntryResponse the entry pusher completes (committed, or
    WAIT_QUORUM_ACK_TIMEOUT, LEADER_PENDING_FULL...)."""
    return AppendEntryResponse(group=group, term=term, leader_id=leader_id, code=int(code),
                               index=index, pos=pos)
