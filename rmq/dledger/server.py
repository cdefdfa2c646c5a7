"""DLedgerServer: one member of a DLedger group on the event loop.

It listens on its own address from the peer list (RocketMQ remoting, DLedger's
request codes and JSON bodies), talks to the others through a ``PeerRpc``,
and runs the elector, the pusher and a thread that flushes the entry files
every 10 ms and persists the checkpoint every 3 s (``FlushDataService``).
``append`` is the leader's write: it resolves once a quorum holds the entry.
``role_handlers`` and ``commit_listeners`` let the broker follow leadership
and the committed index.  The preferred leader takes leadership over through
LEADERSHIP_TRANSFER once it has caught up.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable

from rmq._fast import compiled
from rmq.common.codes import ResponseCode
from rmq.dledger.config import DLedgerConfig
from rmq.dledger.elector import LeaderElector
from rmq.dledger.entry import Entry
from rmq.dledger.flush import FlushDataService
from rmq.dledger.member_state import MemberState, Role
from rmq.dledger.messages import (
    REQUEST_OF,
    AppendEntryRequest,
    AppendEntryResponse,
    GetEntriesRequest,
    GetEntriesResponse,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    MetadataResponse,
    PushEntryResponse,
    RequestOrResponse,
    append_response,
    bare,
    base,
    failure,
    push_answer_bytes,
    push_fields,
    push_of_fields,
    push_response_body,
    read_push,
    reply_to,
)
from rmq.dledger.mmap_store import DLedgerMmapFileStore
from rmq.dledger.protocol import (
    Code,
    DLedgerError,
    JavaHashMap,
    PushType,
    RequestCode,
    decode,
    encode,
)
from rmq.dledger.pusher import EntryPusher
from rmq.dledger.rpc import PUSH_HEAD, PUSH_TAIL, PeerRpc, json_frame_at, push_frame
from rmq.remoting import RemotingCommand, RemotingServer
from rmq.remoting.config import NettyServerConfig
from rmq.remoting.exceptions import RemotingError

log = logging.getLogger("rmq.dledger")

PREFERRED_CHECK_S = 1.0


class DLedgerServer:
    def __init__(self, config: DLedgerConfig, own_store: bool = True) -> None:
        """``own_store``: start and stop the entry files here (False when a
        commit log loads and closes them with the rest of a message store)."""
        config.validate()
        self.own_store = own_store
        self.config = config
        self.member_state = MemberState(config)
        self.store = DLedgerMmapFileStore(config, self.member_state)
        self.rpc = PeerRpc(self.member_state.peer_map)
        self.remoting: RemotingServer | None = None
        self.elector = LeaderElector(config, self.member_state, self.rpc)
        self.commit_listeners: list[Callable[[int], None]] = []
        self.pusher = EntryPusher(config, self.member_state, self.store, self.rpc,
                                  self.commit_listeners)
        self.elector.role_handlers.append(self._on_role)
        self.elector.role_handlers.append(self._take_leadership_check)
        self._take_leadership: tuple[int, asyncio.Future] | None = None
        self._tasks: list[asyncio.Task] = []
        self.flusher = FlushDataService(self.store, config.flush_file_interval_ms)

    # ---- lifecycle -----------------------------------------------------------------
    async def start(self) -> None:
        if self.own_store:
            self.store.startup()
        port = int(self.config.self_addr.rsplit(":", 1)[1])
        self.remoting = RemotingServer(NettyServerConfig(listenPort=port), None, name="dledger")
        self.serve_on(self.remoting)
        await self.remoting.start()
        self.pusher.start()
        self.elector.start()
        loop = asyncio.get_running_loop()
        self.flusher.start()
        self._tasks = [loop.create_task(self._preferred_forever(), name="dledgerPreferred")]
        log.info("dledger %s of group %s on %s, peers %s", self.config.self_id,
                 self.config.group, self.config.self_addr, self.config.peers)

    def serve_on(self, remoting: RemotingServer) -> None:
        """Serve this member's requests on ``remoting``: the processor, and
        the push lane that answers a follower's in-order pushes from the
        receive buffer."""
        processor = _Processor(self)
        remoting.register_default_processor(processor)
        remoting.lane = PushLane(processor._append_rows, remoting.config.frameMaxLength,
                                 ANSWER_HEAD, PUSH_TAIL)

    async def shutdown(self) -> None:
        await self.elector.shutdown()
        await self.pusher.shutdown()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.to_thread(self.flusher.shutdown)
        if self.remoting is not None:
            await self.remoting.stop(1.0)
        await self.rpc.close()
        if self.own_store:
            self.store.shutdown()

    # ---- the leader's write ------------------------------------------------------------
    async def append(self, body: bytes) -> Entry:
        """Append ``body`` as leader; resolves with the entry once committed.
        DLedgerError(NOT_LEADER, LEADER_PENDING_FULL, WAIT_QUORUM_ACK_TIMEOUT...)."""
        if self.pusher.pending_full():
            raise DLedgerError(Code.LEADER_PENDING_FULL)
        entry = self.store.append_as_leader(body)
        return await self.pusher.wait_ack(entry)

    def _on_role(self, term: int, role: Role) -> None:
        self.pusher.on_role_change()

    # ---- request handlers ---------------------------------------------------------------
    def _check_target(self, req: RequestOrResponse) -> Code | None:
        if req.remote_id != self.member_state.self_id:
            return Code.UNKNOWN_MEMBER
        if req.group != self.member_state.group:
            return Code.UNKNOWN_GROUP
        return None

    async def handle(self, code: int, req: RequestOrResponse) -> RequestOrResponse:
        """The answer to one request, as DLedgerServer's handlers shape it
        (every request first checked for this node's id and group)."""
        ms = self.member_state
        wrong = self._check_target(req)
        if wrong is not None:
            return failure(req, wrong, ms.leader_id, code)
        if code == RequestCode.HEART_BEAT:
            return self.elector.handle_heartbeat(req)
        if code == RequestCode.VOTE:
            return self.elector.handle_vote(req)
        if code == RequestCode.PUSH:
            result = self.pusher.handler.handle(req)
            return await result if isinstance(result, asyncio.Future) else result
        if code == RequestCode.METADATA:
            return MetadataResponse(group=ms.group, leader_id=ms.leader_id,
                                    peers=JavaHashMap(ms.peer_map))
        if code == RequestCode.APPEND:
            return await self._handle_append(req)
        if code == RequestCode.GET:
            return self._handle_get(req)
        if code == RequestCode.LEADERSHIP_TRANSFER:
            return await self._handle_leadership_transfer(req)
        return failure(req, Code.UNSUPPORTED, ms.leader_id, code)

    async def _handle_append(self, req: AppendEntryRequest) -> AppendEntryResponse:
        ms = self.member_state
        if not ms.is_leader():
            return failure(req, Code.NOT_LEADER, ms.leader_id, RequestCode.APPEND)
        if ms.transferee is not None:
            return failure(req, Code.LEADER_TRANSFERRING, ms.leader_id, RequestCode.APPEND)
        term = ms.curr_term
        try:
            entry = await self.append(req.body)
        except DLedgerError as exc:
            if exc.code == Code.NOT_LEADER:
                return failure(req, exc.code, ms.leader_id, RequestCode.APPEND)
            return append_response(ms.group, term, ms.self_id, exc.code)
        return append_response(ms.group, entry.term, ms.self_id, Code.SUCCESS, entry.index,
                               entry.pos)

    def _handle_get(self, req: GetEntriesRequest) -> GetEntriesResponse:
        """One entry, answered as 0.3.1.2's leader answers.  A follower serves
        it too (0.3.1.2 answers NOT_LEADER; its client only asks the leader),
        which lets an operator read any member's log."""
        ms = self.member_state
        try:
            entry = self.store.get(req.begin_index)
        except DLedgerError as exc:
            return failure(req, exc.code, ms.leader_id, RequestCode.GET)
        return GetEntriesResponse(group=ms.group, entries=[entry])

    # ---- leadership transfer -------------------------------------------------------------
    async def _handle_leadership_transfer(
            self, req: LeadershipTransferRequest) -> LeadershipTransferResponse:
        """A refused precondition answers as 0.3.1.2's DLedgerServer does (the
        request's base info, the code, this node's leader); the elector's own
        refusals and the outcome carry only a code and a term."""
        ms = self.member_state
        term = req.term
        transfer_id, transferee = req.transfer_id, req.transferee_id

        def refuse(code: Code) -> LeadershipTransferResponse:
            return failure(req, code, ms.leader_id, RequestCode.LEADERSHIP_TRANSFER)

        def answer(code: Code, at: int) -> LeadershipTransferResponse:
            return bare(LeadershipTransferResponse, code, at)

        if transfer_id == ms.self_id:  # the leader, asked to hand over
            if not ms.is_peer(transferee):
                return refuse(Code.UNKNOWN_MEMBER)
            if term != ms.curr_term:
                return refuse(Code.INCONSISTENT_TERM)
            if not ms.is_leader():
                return refuse(Code.NOT_LEADER)
            behind = self.store.ledger_end_index - self.pusher.water_mark(term, transferee)
            if behind >= self.config.max_leadership_transfer_wait_index:
                return refuse(Code.FALL_BEHIND_TOO_MUCH)
            if ms.transferee is not None:
                return answer(Code.LEADER_TRANSFERRING, ms.curr_term)
            ms.transferee = transferee
            take = base(LeadershipTransferRequest, ms.group, ms.self_id, transferee,
                        ms.leader_id, term, take_leadership_ledger_index=ms.ledger_end_index,
                        transfer_id=ms.self_id, transferee_id=transferee)
            try:
                resp = await self.rpc.call(transferee, RequestCode.LEADERSHIP_TRANSFER, take,
                                       self.config.leadership_transfer_wait_timeout + 5000)
            except (DLedgerError, RemotingError, OSError, TimeoutError) as exc:
                resp = reply_to(take, LeadershipTransferResponse, Code.NETWORK_ERROR)
                log.warning("leadership transfer to %s failed: %s", transferee, exc)
            if resp.code != Code.SUCCESS or ms.transferee is not None:
                ms.transferee = None
            return resp
        if transferee == ms.self_id:  # the preferred node, told to take over
            if transfer_id != ms.leader_id:
                return refuse(Code.INCONSISTENT_LEADER)
            deadline = time.monotonic() + self.config.leadership_transfer_wait_timeout / 1000
            while (req.take_leadership_ledger_index or 0) > ms.ledger_end_index:
                if time.monotonic() > deadline:
                    return refuse(Code.TAKE_LEADERSHIP_FAILED)
                await asyncio.sleep(0.01)
            if term != ms.curr_term:
                return answer(Code.INCONSISTENT_TERM, ms.curr_term)
            target = term + 1
            ms.term_to_take_leadership = target
            fut = asyncio.get_running_loop().create_future()
            self._take_leadership = (target, fut)
            self.elector.change_to_candidate(target)
            self.elector.need_increase_term = True
            code, at = await fut
            return answer(code, at)
        return answer(Code.UNEXPECTED_ARGUMENT, ms.curr_term)

    def _take_leadership_check(self, term: int, role: Role) -> None:
        """Answer a take-over once its term is decided (``TakeLeadershipTask``)."""
        if self._take_leadership is None:
            return
        target, fut = self._take_leadership
        if term > target:
            result = (Code.EXPIRED_TERM, term)
        elif term == target:
            if role is Role.LEADER:
                result = (Code.SUCCESS, term)
            elif role is Role.FOLLOWER:
                result = (Code.TAKE_LEADERSHIP_FAILED, term)
            else:
                return
        else:
            result = (Code.TAKE_LEADERSHIP_FAILED if role is Role.FOLLOWER
                      else Code.INTERNAL_ERROR, term)
        if not fut.done():
            fut.set_result(result)
        self.member_state.term_to_take_leadership = -1
        self._take_leadership = None

    async def _preferred_forever(self) -> None:
        while True:
            await asyncio.sleep(PREFERRED_CHECK_S)
            try:
                await self._check_preferred_leader()
            except Exception:  # noqa: BLE001 - retried next second
                log.exception("preferred leader check failed")

    async def _check_preferred_leader(self) -> None:
        ms, config = self.member_state, self.config
        if not ms.is_leader() or not config.preferred_leader_ids or ms.transferee is not None:
            return
        preferred = [p for p in config.preferred_leader_ids.split(";") if p]
        if ms.self_id in preferred:
            return
        live = [p for p in preferred if ms.is_peer(p) and ms.peers_live.get(p)]
        if not live:
            return
        behind = {p: self.store.ledger_end_index - self.pusher.water_mark(ms.curr_term, p)
                  for p in live}
        target = min(live, key=behind.__getitem__)
        if behind[target] >= config.max_leadership_transfer_wait_index:
            return
        req = base(LeadershipTransferRequest, ms.group, ms.self_id, ms.self_id, ms.self_id,
                   ms.curr_term, transfer_id=ms.self_id, transferee_id=target)
        log.info("handing leadership to preferred leader %s (%d behind)", target, behind[target])
        await self._handle_leadership_transfer(req)


class _Processor:
    """Remoting processor: DLedger JSON in, DLedger JSON out in a command
    whose remoting code is DLedger's SUCCESS (200), as
    ``DLedgerRpcNettyService.handleResponse`` answers every request."""

    def __init__(self, server: DLedgerServer) -> None:
        self.server = server

    def process_request(self, channel, request: RemotingCommand):
        """The answer, or (when it must wait) a coroutine of it.  A PUSH a
        follower applies at once -- every push that arrives in order -- is
        answered here, without a task per push."""
        if request.code == RequestCode.PUSH:
            return self._push(request)
        return self._process(request)

    def _push(self, request: RemotingCommand):
        body = request.body or b"{}"
        got = push_fields(body)
        if got is not None:
            answer = self._append_rows(got)
            if answer is not None:
                return RemotingCommand.create_response(Code.SUCCESS, None, None, answer)
            req = push_of_fields(got)
        else:
            try:
                req = read_push(body)
            except (ValueError, TypeError) as exc:  # orjson.JSONDecodeError is a ValueError
                return RemotingCommand.create_response(ResponseCode.SYSTEM_ERROR,
                                                       f"bad DLedger request body: {exc}")
        server = self.server
        wrong = server._check_target(req)
        if wrong is not None:
            resp = failure(req, wrong, server.member_state.leader_id, RequestCode.PUSH)
        else:
            resp = server.pusher.handler.handle(req)
            if isinstance(resp, asyncio.Future):  # parked until the pushes before it arrive
                return self._answer_later(resp)
        return RemotingCommand.create_response(Code.SUCCESS, None, None, push_response_body(resp))

    def _append_rows(self, got: tuple) -> bytes | None:
        """The answer to the push of ``push_fields``' fields when it is the
        common case -- an APPEND to this follower of the entries that come
        next, nothing parked -- its rows appended with no ``Entry`` each
        (``append_rows_as_follower``), answered as ``FollowerHandler``
        answers; None for any other push (``FollowerHandler`` takes it)."""
        group, _local, remote_id, leader_id, term, _code, push_type, commit_index, one, \
            batch = got
        rows = batch or ([one] if one is not None else None)
        server = self.server
        ms, store = server.member_state, server.store
        if not rows or push_type != PushType.APPEND or remote_id != ms.self_id or \
                group != ms.group or not ms.is_follower() or server.pusher.handler.parked or \
                rows[0][0] != store.ledger_end_index + 1:
            return None
        code = Code.SUCCESS
        try:
            store.append_rows_as_follower(rows, term, leader_id or "")
        except DLedgerError as exc:
            log.info("append %d refused: %s", rows[0][0], exc)
            code = Code.INCONSISTENT_STATE
        else:
            before = store.committed_index
            store.update_committed_index(term, commit_index)
            if store.committed_index != before:
                server.pusher.on_committed(store.committed_index)
        begin, end, first = store.ledger_begin_index, store.ledger_end_index, rows[0][0]
        answer = push_answer_bytes(group, code, term, begin, end, first, len(rows))
        if answer is None:  # a group fastjson escapes
            answer = encode(PushEntryResponse(group=group, code=int(code), term=term,
                                              begin_index=begin, end_index=end, index=first,
                                              count=len(rows)))
        return answer

    async def _answer_later(self, pending: asyncio.Future) -> RemotingCommand:
        return RemotingCommand.create_response(Code.SUCCESS, None, None,
                                               push_response_body(await pending))

    async def _process(self, request: RemotingCommand) -> RemotingCommand:
        if request.code not in RequestCode._value2member_map_:
            return RemotingCommand.create_response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                f" request type {request.code} not supported")
        if request.code == RequestCode.PULL:
            # 0.3.1.2 has no PULL handler: its processor fails and the remoting
            # layer answers SYSTEM_ERROR without a body.
            return RemotingCommand.create_response(ResponseCode.SYSTEM_ERROR,
                                                   "DLedger serves no PULL request")
        try:
            req = REQUEST_OF[request.code].from_json(decode(request.body or b"{}"))
        except (ValueError, TypeError) as exc:  # orjson.JSONDecodeError is a ValueError
            return RemotingCommand.create_response(ResponseCode.SYSTEM_ERROR,
                                                   f"bad DLedger request body: {exc}")
        resp = await self.server.handle(request.code, req)
        return RemotingCommand.create_response(Code.SUCCESS, None, None, encode(resp))


# A follower's answer to a push as the general way writes it: the
# RemotingCommand of ``_Processor._push`` (code DLedger's SUCCESS, the
# response flag, the request's opaque; ``PUSH_TAIL`` ends it too)
ANSWER_HEAD = b'{"code":%d,"flag":1,"language":"JAVA","opaque":' % Code.SUCCESS
_PLAIN_PUSH = re.compile(re.escape(PUSH_HEAD) + rb'(0|-?[1-9][0-9]*),"serializeTypeCurrentRPC":'
                         rb'"JSON","version":(0|-?[1-9][0-9]*)\}')


def py_push_at(buf, pos: int, end: int, max_frame: int) -> tuple[int, int, int] | None:
    """(opaque, body start, frame end) of the whole PUSH request frame at
    ``pos`` in ``buf[:end]`` when its JSON header has exactly the form
    leaders write (``PUSH_HEAD``, the opaque, ``PUSH_TAIL`` with any version;
    integers in JSON's form within int32, not -0); None for anything else,
    which the general decoder reads or refuses as before.  The twin of
    ``rmq._fast.dledger_follow.push_at``."""
    got = json_frame_at(buf, pos, end, max_frame)
    if got is None:
        return None
    head = _PLAIN_PUSH.fullmatch(buf, pos + 8, got[0])
    if head is None:
        return None
    opaque, version = int(head.group(1)), int(head.group(2))
    if not (-2147483648 <= opaque <= 2147483647 and -2147483648 <= version <= 2147483647):
        return None
    return opaque, got[0], got[1]


class PyPushLane:
    """The frame lane of a DLedger member's server (``RemotingService.lane``):
    the leading PUSH frames of a read in the plain form (``py_push_at``)
    that ``append_rows`` (``_Processor._append_rows``) takes -- an APPEND of
    the entries that come next, to a follower with nothing parked -- each
    read from the receive buffer where it lies and answered with the bytes
    the general way writes, without a ``RemotingCommand`` either way, the
    body's copy and the general dispatch's Python frames (about a dozen a
    push).  Any other frame, and what follows it, goes the general way, as
    does a push whose ``append_rows`` raised (logged; the general way then
    answers it: a failure, or a resend of entries the follower holds).
    The twin of ``rmq._fast.dledger_follow.PushLane``."""

    __slots__ = ("append_rows", "max_frame", "answer_head", "answer_tail", "count")

    def __init__(self, append_rows: Callable[[tuple], bytes | None], max_frame: int,
                 answer_head: bytes, answer_tail: bytes) -> None:
        """Each push answered in the frame of ``answer_head``, its opaque,
        ``answer_tail`` (``ANSWER_HEAD`` and ``PUSH_TAIL``: the general
        way's) and the answer ``append_rows`` made."""
        self.append_rows = append_rows
        self.max_frame = max_frame
        self.answer_head = answer_head
        self.answer_tail = answer_tail
        self.count = 0  # the pushes the last ``serve`` answered

    def serve(self, channel, buf, pos: int, end: int) -> tuple[int, bytes | None]:
        answers = []
        while pos < end:
            got = py_push_at(buf, pos, end, self.max_frame)
            if got is None:
                break
            fields = push_fields(buf[got[1]:got[2]])
            if fields is None:
                break
            try:
                answer = self.append_rows(fields)
            except Exception:  # noqa: BLE001 - the general way takes the push and answers it
                log.exception("push lane: a push from %s failed", fields[3])
                break
            if answer is None:
                break
            answers.append(push_frame(self.answer_head, got[0], self.answer_tail, answer))
            pos = got[2]
        self.count = len(answers)
        return pos, b"".join(answers) if answers else None

    def served(self) -> list[tuple[int, bool, int, int]]:
        """(code, oneway, count, response code) of what the last ``serve`` answered."""
        return [(int(RequestCode.PUSH), False, self.count, int(Code.SUCCESS))]


_c = compiled("dledger_follow")
PushLane = PyPushLane if _c is None else _c.PushLane
