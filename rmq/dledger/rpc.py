"""The requests a DLedger member sends to its peers, over one remoting client
(``DLedgerRpcNettyService``'s sending half): the elector and the pusher hold
this object, not the server, so that each sees only the wire.

A leader's APPEND pushes -- one per follower and push round, its costliest
requests -- skip the general request path: ``PeerClient.push_entries``
writes each as a whole frame built from its entries in one call
(``push_entries_frame``: the bytes the general client writes for the same
request, opaque from the same counter) on the peer's connection, and keeps
its wait (a ``FrameWait``) in the general response table
(``RemotingNode.send_frame``); the connection's lane (``PushAnswers``)
finds the answers' frames in the receive buffer (``answer_at``) and tells
their bodies to the waits, without a ``RemotingCommand``, a future or a loop
callback per push.  The pushes time out with the response table's scan and
fail when their connection closes, as the general client's requests do; a
push to a peer not connected (or with RPC hooks on), and an answer in
another header form, take the general way.
"""

from __future__ import annotations

import asyncio
import logging
import re
import struct
from collections.abc import Callable

from rmq._fast import compiled
from rmq.common.codes import CURRENT_VERSION
from rmq.dledger.entry import Entry
from rmq.dledger.messages import (
    RESPONSE_OF,
    RequestOrResponse,
    _push_body,
)
from rmq.dledger.protocol import Code, DLedgerError, RequestCode, encode, read_answer
from rmq.remoting import RemotingClient, RemotingCommand
from rmq.remoting.abstract import FrameWait
from rmq.remoting.channel import Channel
from rmq.remoting.command import next_opaque

log = logging.getLogger("rmq.dledger")

RPC_TIMEOUT_MS = 3000

# A PUSH request's JSON header around its opaque, as the general codec
# writes ``RemotingCommand.create_request(PUSH, None, body)``'s.
PUSH_HEAD = b'{"code":%d,"flag":0,"language":"JAVA","opaque":' % RequestCode.PUSH
PUSH_TAIL = b',"serializeTypeCurrentRPC":"JSON","version":%d}' % CURRENT_VERSION
_PREFIX = struct.Struct(">ii")
_INT = rb"(0|-?[1-9][0-9]*)"  # (not -0: the compiled reader leaves it to orjson)
_ANSWER_HEAD = re.compile(rb'\{"code":' + _INT + rb',"flag":' + _INT
                          + rb',"language":"[A-Z_]+","opaque":' + _INT
                          + rb'(?:,"serializeTypeCurrentRPC":"JSON")?,"version":' + _INT + rb"\}")


def py_push_frame(head: bytes, opaque: int, tail: bytes, body: bytes) -> bytes:
    """The frame of ``head``, ``opaque`` in decimal, ``tail`` (the JSON
    header) and ``body``, with its length and header-length words."""
    header = b"%b%d%b" % (head, opaque, tail)
    return b"".join((_PREFIX.pack(4 + len(header) + len(body), len(header)), header, body))


def json_frame_at(buf, pos: int, end: int, max_frame: int) -> tuple[int, int] | None:
    """(header end, frame end) of the whole frame at ``pos`` in ``buf[:end]``
    (its header from ``pos + 8``) when it is no longer than ``max_frame``
    and its header is JSON; None for anything else."""
    if pos < 0 or end > len(buf) or end - pos < 8:
        return None
    length = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
    if length < 4 or length > max_frame or end - pos - 4 < length:
        return None
    hlen = int.from_bytes(buf[pos + 4:pos + 8], "big")
    if hlen >> 24 or hlen > length - 4:  # (the top byte: a serialize type other than JSON)
        return None
    return pos + 8 + hlen, pos + 4 + length


def py_answer_at(buf, pos: int, end: int, max_frame: int) -> tuple[int, int, int] | None:
    """(opaque, body start, frame end) of the whole response frame at
    ``pos`` in ``buf[:end]`` when its JSON header has exactly the plain form
    rmq and 0.3.1.2 answer with (code, flag, language, opaque, the optional
    serializeTypeCurrentRPC, version; integers in JSON's form within int32, not -0;
    no whitespace, remark or extFields); None for anything else, which the
    general decoder reads or refuses as before."""
    got = json_frame_at(buf, pos, end, max_frame)
    if got is None:
        return None
    head = _ANSWER_HEAD.fullmatch(buf, pos + 8, got[0])
    if head is None:
        return None
    code, flag, opaque, version = (int(n) for n in head.groups())
    for n in (code, flag, opaque, version):
        if not -2147483648 <= n <= 2147483647:
            return None
    if not flag & 1:
        return None
    return opaque, got[0], got[1]


def py_push_entries_frame(head: bytes, opaque: int, tail: bytes, group: bytes, ids: bytes,
                          term: int, commit_index: int, entries: list[Entry],
                          batch: bool) -> bytes:
    """The whole frame of an APPEND push of ``entries`` (``push_frame`` of
    ``messages._push_body``'s bytes): the twin of
    ``rmq._fast.dledger_push.encode_push_frame``."""
    return py_push_frame(head, opaque, tail,
                         _push_body(group, ids, term, commit_index, entries, batch))


push_frame = py_push_frame
answer_at = py_answer_at
push_entries_frame = py_push_entries_frame
_c = compiled("dledger_frames")
if _c is not None:
    push_frame = _c.push_frame
    answer_at = _c.answer_at
_p = compiled("dledger_push")
if _p is not None:
    push_entries_frame = _p.encode_push_frame


class _Answered:
    """A push that went the general way: its remoting callback, the
    answer's body told to the push's wait as the lane tells it."""

    __slots__ = ("wait",)

    def __init__(self, wait: FrameWait) -> None:
        self.wait = wait

    def __call__(self, response: RemotingCommand | None, error: BaseException | None) -> None:
        self.wait.tell(None if error is not None else response.body)


class PyPushAnswers:
    """The frame lane of a ``PeerClient``'s connections: the leading frames
    of a read that answer raw-frame requests of the response table
    (instances of ``wait_type``, ``FrameWait``), each body told to its wait;
    the first other frame, and what follows it, go the general way.  The
    twin of ``rmq._fast.dledger_frames.PushAnswers``."""

    __slots__ = ("responses", "max_frame", "wait_type")

    def __init__(self, responses: dict, max_frame: int, wait_type: type) -> None:
        self.responses = responses
        self.max_frame = max_frame
        self.wait_type = wait_type

    def serve(self, channel: Channel, buf: memoryview, pos: int, end: int
              ) -> tuple[int, None]:
        responses, max_frame, wait_type = self.responses, self.max_frame, self.wait_type
        while pos < end:
            got = py_answer_at(buf, pos, end, max_frame)
            if got is None:
                break
            entry = responses.get(got[0])
            if entry is None or not isinstance(entry[0], wait_type):
                break
            del responses[got[0]]
            pos = got[2]
            entry[0].tell(buf[got[1]:pos])
        return pos, None

    def served(self) -> list[tuple[int, bool, int]]:
        return []


PushAnswers = PyPushAnswers if _c is None else _c.PushAnswers


class PeerClient(RemotingClient):
    """The remoting client of a member's requests to its peers, with the
    leader's APPEND pushes written as raw frames (``send_frame``: kept in
    the general response table, timed out by its scan) and their answers
    read from the receive buffer by the connections' lane."""

    def __init__(self) -> None:
        super().__init__()
        self.lane = PushAnswers(self._responses, self.config.frameMaxLength, FrameWait)

    def push(self, addr: str, body: bytes, timeout_ms: int, wait: FrameWait,
             more: bool = False) -> None:
        """Send the APPEND push ``body`` to ``addr``: ``wait`` is told the
        answer's body (``messages.push_answer`` reads it), or None when
        none came in time or the connection failed, once, on the loop.
        ``more``: another push to the same peer follows in this loop turn
        (they go out in one write at its end; else this one is written at
        once)."""
        ch = self._table.get(addr)
        if ch is None or self._rpc_hooks or not ch.is_active():
            self.invoke_callback(addr, RemotingCommand.create_request(RequestCode.PUSH, None, body),
                                 timeout_ms, _Answered(wait))
            return
        opaque = next_opaque()
        self.send_frame(ch, opaque, push_frame(PUSH_HEAD, opaque, PUSH_TAIL, body), timeout_ms,
                        wait, more)

    def push_entries(self, addr: str, names: tuple[bytes, bytes], term: int,
                     commit_index: int, entries: list[Entry], batch: bool, timeout_ms: int,
                     wait: FrameWait, more: bool = False) -> None:
        """``push`` of the APPEND push of ``entries`` (``names``: the group
        and id members ``messages._names`` writes), its frame built from
        the entries in one call (``push_entries_frame``) when the peer is
        connected."""
        ch = self._table.get(addr)
        if ch is None or self._rpc_hooks or not ch.is_active():
            self.push(addr, _push_body(names[0], names[1], term, commit_index, entries, batch),
                      timeout_ms, wait)
            return
        opaque = next_opaque()
        self.send_frame(ch, opaque, push_entries_frame(PUSH_HEAD, opaque, PUSH_TAIL, names[0],
                                                       names[1], term, commit_index, entries,
                                                       batch), timeout_ms, wait, more)


class PeerRpc:
    def __init__(self, peer_map: dict[str, str]) -> None:
        """``peer_map``: peer id -> address, as the member state holds it."""
        self.peer_map = peer_map
        self.client = PeerClient()

    async def close(self) -> None:
        await self.client.close()

    async def call(self, peer: str, code: int, body: RequestOrResponse | bytes,
                   timeout_ms: int = RPC_TIMEOUT_MS) -> RequestOrResponse:
        """One DLedger request to ``peer`` (``body`` a request, or its JSON
        already encoded); its answer, of the response class of ``code``.  As 0.3.1.2 reads it: the body decides, whatever the
        remoting code (200 from DLedger, 0 from older rmq nodes); an answer
        without a JSON body (a remoting error such as SYSTEM_ERROR), or with
        one that does not bind to the response class, is a NETWORK_ERROR."""
        request = RemotingCommand.create_request(
            int(code), None, body if type(body) is bytes else encode(body))
        response = await self.client.invoke(self.peer_map[peer], request, timeout_ms)
        answer = read_answer(peer, response)
        try:
            return RESPONSE_OF[code].from_json(answer)
        except (ValueError, TypeError) as exc:
            raise DLedgerError(Code.NETWORK_ERROR, f"{peer} answered {answer}: {exc}") from None

    def call_then(self, peer: str, code: int, body: RequestOrResponse | bytes,
                  done: Callable[[RequestOrResponse | None], None],
                  timeout_ms: int = RPC_TIMEOUT_MS) -> None:
        """``call`` without a task or a coroutine (the leader's pushes, one per
        follower and batch): ``done(answer)`` on the loop, or ``done(None)``
        when no answer came or it does not bind to the response class."""
        request = RemotingCommand.create_request(
            int(code), None, body if type(body) is bytes else encode(body))

        def finished(response: RemotingCommand | None, error: BaseException | None) -> None:
            if error is not None:
                done(None)
                return
            try:
                answer = RESPONSE_OF[code].from_json(read_answer(peer, response))
            except (DLedgerError, ValueError, TypeError):
                done(None)
                return
            done(answer)

        self.client.invoke_callback(self.peer_map[peer], request, timeout_ms, finished)

    def spawn_call(self, peer: str, code: int, body: RequestOrResponse | bytes) -> asyncio.Task:
        """``call`` as a task whose failure is read even when nobody awaits it
        (a heartbeat or vote answered after the quorum was reached)."""
        task = asyncio.ensure_future(self.call(peer, code, body))
        task.add_done_callback(_read_failure)
        return task


def _read_failure(task: asyncio.Task) -> None:
    if not task.cancelled():
        task.exception()
