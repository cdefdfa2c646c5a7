"""DLedgerEntryPusher: log replication by push from the leader (DLedger 0.3.1.2).

Leader side, one dispatcher per follower, in one of three states:

* COMPARE — find the last index where the follower holds the leader's entry
  (walking back from the leader's end, using the follower's begin and end);
* TRUNCATE — make that entry the follower's last, dropping a divergent tail;
* APPEND — push entries in order (pipelined up to 1,000 in flight, or in
  batches with ``enableBatchPush``; what is appended is pushed from the
  loop once per turn, without waking the dispatcher's task), resend one
  not acknowledged within ``maxPushTimeOutMs``, and send COMMIT once a
  second when idle.

Each acknowledgement raises the follower's water mark for the term; the
quorum checker takes the median water mark as the committed index and
completes the appends waiting for it (``maxWaitAckTimeMs`` later they fail
with WAIT_QUORUM_ACK_TIMEOUT).  Waits are kept in index order and settled
from the front in one pass; puts appended between two pushes share one
(Java keeps a future per entry).  Follower side, pushes are applied in index
order; one that arrives early waits for the gap to close.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from rmq._fast import compiled
from rmq.dledger.entry import Entry
from rmq.dledger.member_state import Role
from rmq.dledger.messages import (
    PushEntryRequest,
    PushEntryResponse,
    _names,
    push_answer,
    push_request,
    push_response,
    read_push_answer,
)
from rmq.dledger.protocol import Code, DLedgerError, PushType, RequestCode
from rmq.dledger.rpc import PUSH_HEAD, PUSH_TAIL, RPC_TIMEOUT_MS
from rmq.remoting.abstract import FrameWait
from rmq.remoting.channel import Channel
from rmq.remoting.command import OPAQUES

if TYPE_CHECKING:
    from rmq.dledger.config import DLedgerConfig
    from rmq.dledger.member_state import MemberState
    from rmq.dledger.mmap_store import DLedgerMmapFileStore
    from rmq.dledger.rpc import PeerRpc

log = logging.getLogger("rmq.dledger")

_SUCCESS = int(Code.SUCCESS)

MAX_PENDING = 1000  # pushes in flight per follower (EntryDispatcher.maxPendingSize)
IDLE_S = 0.05


def _now_ms() -> float:
    return time.monotonic() * 1000


class Wakeup:
    """An event to sleep on with a timeout, without a task per wait (what
    ``asyncio.wait_for(event.wait(), t)`` would cost every round)."""

    __slots__ = ("_future", "_pending")

    def __init__(self) -> None:
        self._future: asyncio.Future | None = None
        self._pending = False  # set while nobody waited: the next wait returns at once

    def set(self) -> None:
        fut = self._future
        if fut is None:
            self._pending = True
        elif not fut.done():  # (done: the sleeper wakes anyway)
            fut.set_result(None)

    async def wait(self, loop: asyncio.AbstractEventLoop, timeout: float) -> None:
        """Sleep on the running ``loop`` (the caller's, kept: asyncio's
        get_running_loop() makes a getpid() system call) until ``set`` or
        for ``timeout`` seconds."""
        if self._pending:
            self._pending = False
            return
        fut = self._future = loop.create_future()
        handle = loop.call_later(timeout, _wake, fut)
        try:
            await fut
        finally:
            handle.cancel()
            self._future = None


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


class AckGroup:
    """Appends waiting for their quorum: the entries up to ``last`` of one term
    share one outcome, settled in order when the quorum index reaches ``last``.

    Puts appended between two pushes join the open group (entries commit in
    order, so the last one's quorum covers them all): the leader keeps one
    waiter per push rather than one per entry, and settles them in one pass
    from the front of a queue ordered by index (and so by deadline).  A
    waiter is told by a future (made when asked for, ``future_on``) or by a
    plain callback (``then``: the DLedger lane's answers, no future and no
    loop callback per read)."""

    __slots__ = ("term", "first", "last", "deadline", "_future", "outcome", "entry", "then",
                 "settled")

    def __init__(self, entry: Entry, first: int, deadline: float,
                 outcome: Callable[[int | None], object] | None) -> None:
        self.term = entry.term
        self.first = first
        self.last = entry.index
        self.entry = entry
        self.outcome = outcome
        self._future: asyncio.Future | None = None
        self.then: list[Callable[[object], None]] | None = None
        self.settled = False
        self.deadline = deadline

    def future_on(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future:
        """The group's future, made on ``loop`` (the pusher's, kept: asking
        asyncio for the running loop is a getpid() system call) the first
        time a waiter asks for it."""
        fut = self._future
        if fut is None:
            fut = self._future = loop.create_future()
        return fut

    def settle(self, code: int | None, why: str = "") -> None:
        """``code`` None: a quorum holds the entries; else why they failed.
        Without an ``outcome`` the future gets the entry or a DLedgerError;
        with one, the future and each ``then`` callback get what
        ``outcome(code)`` makes of it.  (The compiled quorum check takes
        a held quorum's settle with an outcome itself, the same steps:
        ``dledger_frames.settle``.)"""
        if self.settled:
            return
        self.settled = True
        fut = self._future
        if self.outcome is not None:
            value = self.outcome(code)
            if fut is not None and not fut.done():
                fut.set_result(value)
            if self.then is not None:
                for then in self.then:
                    try:
                        then(value)
                    except Exception:  # noqa: BLE001 - one waiter's bug must not stop the rest
                        log.exception("quorum waiter failed")
        elif fut is None or fut.done():
            return
        elif code is None:
            fut.set_result(self.entry)
        else:
            fut.set_exception(DLedgerError(Code(code), why))


class EntryPusher:
    # the fields a follower's answer, the quorum check, a lane's quorum wait
    # and the push round read (``dledger_frames.tell_acked``, ``check_quorum``,
    # ``wait_quorum_then``, ``dledger_push.push_round``) as slots, read there
    # at their offsets; the others in the instance dict
    __slots__ = ("water_marks", "ms", "store", "waiters", "_open", "commit_listeners", "loop",
                 "_push_soon", "config", "dispatchers", "__dict__")

    def __init__(self, config: DLedgerConfig, member_state: MemberState,
                 store: DLedgerMmapFileStore, rpc: PeerRpc,
                 commit_listeners: list[Callable[[int], None]]) -> None:
        """``commit_listeners``: each told ``listener(index)`` each time the
        committed index moves (the list is shared: listeners added to it
        later are told too)."""
        self.rpc = rpc
        self.ms = member_state
        self.store = store
        self.config = config
        self.commit_listeners = commit_listeners
        self.water_marks: dict[int, dict[str, int]] = {}  # term -> peer -> acknowledged index
        self.waiters: deque[AckGroup] = deque()  # by index; older terms are failed first
        self._open: AckGroup | None = None  # the group later puts may join
        self.dispatchers = {peer: PeerDispatcher(self, peer) for peer in self.ms.others()}
        self._push_soon = False  # a push round is scheduled for this loop turn
        # the loop the pusher runs on (``start``), kept: asyncio.get_running_loop()
        # makes a getpid() system call each time, and each read and push round
        # would ask for it
        self.loop: asyncio.AbstractEventLoop | None = None
        # during a push round, the entries the last push carried ([] before
        # the first; the next follower at the same index pushes the same
        # ones); None outside a round
        self._round_run: list[Entry] | None = None
        self.handler = FollowerHandler(self)
        self._timer: asyncio.Task | None = None

    def start(self) -> None:
        self.loop = loop = asyncio.get_running_loop()
        for d in self.dispatchers.values():
            d.start()
        self._timer = loop.create_task(self._expire_waiters())

    async def shutdown(self) -> None:
        tasks = [d.task for d in self.dispatchers.values() if d.task is not None]
        if self._timer is not None:
            tasks.append(self._timer)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._fail_waiters(lambda _g: True, Code.TERM_CHANGED, "shutting down")

    # ---- water marks and the committed index --------------------------------
    def _marks(self, term: int) -> dict[str, int]:
        marks = self.water_marks.get(term)
        if marks is None:
            marks = self.water_marks[term] = dict.fromkeys(self.ms.peer_map, -1)
            for old in [t for t in self.water_marks if t != term]:
                del self.water_marks[old]
        return marks

    def update_water_mark(self, term: int, peer: str, index: int) -> None:
        marks = self.water_marks.get(term)
        if marks is None:
            marks = self._marks(term)
        if marks[peer] < index:
            marks[peer] = index
            ms = self.ms
            if ms.role is Role.LEADER and term == ms.curr_term:
                self._check_quorum(marks)

    def on_committed(self, index: int) -> None:
        """Tell the commit listeners that the committed index moved to ``index``."""
        for listener in self.commit_listeners:
            listener(index)

    def water_mark(self, term: int, peer: str) -> int:
        return self._marks(term)[peer]

    # (the twin ``_check_quorum`` below, or its compiled one)
    _check_quorum: Callable[[EntryPusher, dict[str, int] | None], None]

    # ---- appends on the leader ------------------------------------------------
    def pending_full(self) -> bool:
        waiting = self.waiters
        return bool(waiting) and \
            waiting[-1].last - waiting[0].first >= self.config.max_pending_requests_num

    def wait_ack(self, entry: Entry) -> asyncio.Future:
        """A future completed with ``entry`` once a quorum holds it (or failed
        with the DLedgerError of why not)."""
        return self._wait(entry, entry.index, None)

    def wait_quorum(self, entry: Entry, first: int,
                    outcome: Callable[[int | None], object],
                    then: Callable[[object], None] | None = None) -> asyncio.Future | None:
        """A future of ``outcome(None)`` once a quorum holds the entries
        ``first``..``entry``, else of ``outcome(code)``.  Puts with the same
        ``outcome`` appended before the next push share one wait.  With
        ``then``, no future: ``then(outcome(...))`` is called instead, on
        the loop, when the wait ends (at once when it already has).  (The
        ``then`` form of a read of entries is ``wait_quorum_then``.)"""
        group = self._open
        if group is not None and group.outcome is outcome and group.term == entry.term \
                and group.last < entry.index and not group.settled:
            group.last = entry.index
        else:
            group = self._new_group(entry, first, outcome)
        if then is None:
            fut = group.future_on(self.loop)
        else:
            fut = None
            if group.then is None:
                group.then = [then]
            else:
                group.then.append(then)
        self._appended_more()
        return fut

    def _wait(self, entry: Entry, first: int,
              outcome: Callable[[int | None], object] | None) -> asyncio.Future:
        group = self._new_group(entry, first, outcome)
        fut = group.future_on(self.loop)
        self._appended_more()
        return fut

    def _new_group(self, entry: Entry, first: int,
                   outcome: Callable[[int | None], object] | None) -> AckGroup:
        waiting = self.waiters
        if waiting and waiting[0].term != entry.term:  # TERM_CHANGED, as the ack checker does
            self._fail_waiters(lambda g: g.term != entry.term, Code.TERM_CHANGED)
            waiting = self.waiters  # (the groups kept: a new queue)
        group = AckGroup(entry, first, _now_ms() + self.config.max_wait_ack_time_ms, outcome)
        waiting.append(group)
        self._open = group
        return group

    def _appended_more(self) -> None:
        """Entries were appended: push them once this loop turn's other work
        is done (the reads served in the same turn share the push), from the
        loop's ready queue rather than by waking each dispatcher's task."""
        if not self.dispatchers:  # a group of one: the leader's own log is the quorum
            self._check_quorum()
            return
        if not self._push_soon:
            self._push_soon = True
            self.loop.call_soon(self._push_round)

    # (the twin ``_push_round`` below, or its compiled one)
    _push_round: Callable[[EntryPusher], None]

    def _fail_waiters(self, which: Callable[[AckGroup], bool], code: int,
                      why: str = "") -> None:
        kept: deque[AckGroup] = deque()
        for group in self.waiters:
            if which(group):
                group.settle(code, why)
            else:
                kept.append(group)
        self.waiters = kept
        self._open = None

    async def _expire_waiters(self) -> None:
        """Every 50 ms: fail appends past their wait, and (as the ack checker's
        leak check does) count the leader's own log, so that entries a new
        leader inherited commit without waiting for a new append."""
        while True:
            await asyncio.sleep(0.05)
            if self.ms.is_leader():
                self._check_quorum()
            now = _now_ms()
            waiting = self.waiters
            while waiting and waiting[0].deadline < now:
                group = waiting.popleft()
                if group is self._open:
                    self._open = None
                group.settle(Code.WAIT_QUORUM_ACK_TIMEOUT if group.term == self.ms.curr_term
                             else Code.TERM_CHANGED, f"index {group.last}")

    def on_role_change(self) -> None:
        """Appends of an old leadership fail now; dispatchers look again."""
        leader, term = self.ms.is_leader(), self.ms.curr_term
        self._fail_waiters(lambda g: not leader or g.term != term, Code.TERM_CHANGED)
        for d in self.dispatchers.values():
            d.wake.set()


def _check_quorum(pusher: EntryPusher, own: dict[str, int] | None = None) -> None:
    """``EntryPusher._check_quorum``: commit the median water mark and
    settle the groups it covers (``own``: the current term's marks, when
    the caller has them).  Runs once per follower's answer on the leader,
    so it reads each attribute once and calls the commit listeners itself.
    The twin of ``rmq._fast.dledger_frames.check_quorum``, which reads the
    pusher's, member state's and store's fields at their slots."""
    ms, store = pusher.ms, pusher.store
    term = ms.curr_term
    if own is None:
        own = pusher._marks(term)
    end = store.ledger_end_index
    self_id = ms.self_id
    if own[self_id] < end:
        own[self_id] = end
    marks = sorted(own.values(), reverse=True)
    quorum_index = marks[len(marks) >> 1]
    before = store.committed_index
    if quorum_index > before:
        store.update_committed_index(term, quorum_index)
    waiting = pusher.waiters
    while waiting and waiting[0].last <= quorum_index:
        group = waiting.popleft()
        if group is pusher._open:
            pusher._open = None
        group.settle(None if group.term == term else Code.TERM_CHANGED)
    committed = store.committed_index
    if committed != before:
        for listener in pusher.commit_listeners:
            listener(committed)


def _push_round(pusher: EntryPusher) -> None:
    """``EntryPusher._push_round``: each dispatcher's ``push_now``;
    followers level with each other push the same entries, read once for
    the round (``_round_run``).  The twin of
    ``rmq._fast.dledger_push.push_round``, which does the same steps in one
    call: ``push_now``, ``_push_from``, ``PeerClient.push_entries``,
    ``RemotingNode.send_frame`` and ``Channel.write_bytes``, fields read at
    their slots."""
    pusher._push_soon = False
    pusher._round_run = []
    try:
        for d in pusher.dispatchers.values():
            d.push_now()
    finally:
        pusher._round_run = None


def _wait_quorum_then(pusher: EntryPusher, outcome: Callable[[int | None], object],
                      first: Entry, last: Entry, then: Callable[[object], None]) -> None:
    """The quorum wait of the entries ``first``..``last`` (a DLedger lane's
    read), told to ``then`` (``then(outcome(...))``, no future):
    ``pusher.wait_quorum(last, first.index, outcome, then)``.  The twin of
    ``rmq._fast.dledger_frames.wait_quorum_then``, which does its steps
    (joining the open group or making one, its deadline, the push round
    asked for) in one call, the fields read and set at their slots and the
    group made without its ``__init__``."""
    pusher.wait_quorum(last, first.index, outcome, then)


_frames = compiled("dledger_frames")
EntryPusher._check_quorum = _check_quorum if _frames is None else _frames.check_quorum
# (called as ``wait_quorum_then(pusher, outcome, first, last, then)``)
wait_quorum_then = _wait_quorum_then if _frames is None else _frames.wait_quorum_then


class PeerDispatcher:
    """The leader's replication to one follower (``EntryDispatcher``)."""

    # the fields a follower's answer reads (``dledger_frames.tell_acked``)
    # and a push round (``dledger_push.push_round``) as slots, read there at
    # their offsets; the others in the instance dict
    __slots__ = ("pusher", "peer", "pending", "write_index", "wake", "state", "term", "names",
                 "last_push_commit", "__dict__")

    def __init__(self, pusher: EntryPusher, peer: str) -> None:
        self.pusher = pusher
        self.peer = peer
        self.state = PushType.COMPARE
        self.term = -1
        self.write_index = -1
        self.compare_index = -1
        self.pending: dict[int, float] = {}  # first index of a push in flight -> sent at
        ms = pusher.ms
        # the group and id members of every APPEND push to this follower
        self.names = _names(ms.group, ms.self_id, peer, ms.self_id)
        self.last_push_commit = 0.0
        self.wake = Wakeup()
        self.task: asyncio.Task | None = None

    def start(self) -> None:
        self.task = self.pusher.loop.create_task(self._run(), name=f"dledgerPush-{self.peer}")

    async def _run(self) -> None:
        while True:
            try:
                if self._fresh():
                    if self.state == PushType.APPEND:
                        self._do_append()
                    else:
                        await self._do_compare()
                await self.wake.wait(self.pusher.loop, IDLE_S)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a failed peer: compare again later
                log.info("push to %s: %s", self.peer, exc)
                self._change(-1, PushType.COMPARE)
                await asyncio.sleep(0.5)

    # ---- state -----------------------------------------------------------------------
    def _fresh(self) -> bool:
        ms = self.pusher.ms
        if not ms.is_leader():
            return False
        if self.term != ms.curr_term:
            self.term = ms.curr_term
            self._change(-1, PushType.COMPARE)
        return True

    def _change(self, index: int, target: str) -> None:
        if target == PushType.APPEND:
            self.compare_index = -1
            self.pusher.update_water_mark(self.term, self.peer, index)
            self.write_index = index + 1
        elif target == PushType.COMPARE:
            self.compare_index = -1
            self.pending.clear()
        else:
            self.compare_index = -1
        self.state = target

    def _request(self, push_type: str, entry: Entry | None = None,
                 batch: list[Entry] | None = None) -> PushEntryRequest:
        ms, store = self.pusher.ms, self.pusher.store
        return push_request(ms.group, ms.self_id, self.peer, ms.self_id, self.term, push_type,
                            store.committed_index, entry, batch)

    # ---- append -----------------------------------------------------------------------
    def push_now(self) -> None:
        """Push what was appended, from the loop (``_push_round``): a
        dispatcher that is not appending, or whose term is over, is woken to
        look again in its task instead (as is one with ``MAX_PENDING``
        pushes in flight: the task drops the acknowledged ones and resends
        overdue ones, besides the idle COMMIT)."""
        pusher = self.pusher
        ms, store = pusher.ms, pusher.store
        if self.state != PushType.APPEND or self.term != ms.curr_term or \
                ms.role is not Role.LEADER:
            self.wake.set()
            return
        try:
            while self.write_index <= store.ledger_end_index:
                if len(self.pending) >= MAX_PENDING:
                    self.wake.set()
                    return
                self._push_from(self.write_index)
        except Exception as exc:  # noqa: BLE001 - as in the task: compare again
            log.info("push to %s: %s", self.peer, exc)
            self._change(-1, PushType.COMPARE)

    def _push_from(self, index: int) -> None:
        """Push the entries from ``index`` (``write_index``) one push carries;
        later puts wait in a quorum group of their own."""
        pusher = self.pusher
        store, config = pusher.store, pusher.config
        batch = config.enable_batch_push
        run = pusher._round_run
        if run and run[0].index == index:
            entries = run
        else:
            entries = store.kept_run(index, config.max_batch_push_size if batch else 0)
            if run is not None:
                pusher._round_run = entries
        pusher._open = None
        after = index + len(entries)
        self.pending[index] = self.last_push_commit = time.monotonic() * 1000
        pusher.rpc.client.push_entries(
            pusher.rpc.peer_map[self.peer], self.names, self.term, store.committed_index, entries,
            batch or after - index > 1, RPC_TIMEOUT_MS, _Acked(self, after - index),
            after <= store.ledger_end_index)
        self.write_index = after

    def _do_append(self) -> None:
        store = self.pusher.store
        while self.state == PushType.APPEND and self.pusher.ms.is_leader():
            if self.write_index > store.ledger_end_index:
                self._do_commit()
                self._resend_overdue()
                return
            mark = self.pusher.water_mark(self.term, self.peer)
            for index in [i for i in self.pending if i <= mark]:
                del self.pending[index]
            if len(self.pending) >= MAX_PENDING:
                self._resend_overdue()
                return
            self._push_from(self.write_index)

    def _resend(self, entries: list[Entry]) -> None:
        """Push ``entries`` again (the first not acknowledged in time)."""
        pusher = self.pusher
        self.pending[entries[0].index] = self.last_push_commit = _now_ms()
        pusher.rpc.client.push_entries(
            pusher.rpc.peer_map[self.peer], self.names, self.term, pusher.store.committed_index,
            entries, len(entries) > 1 or pusher.config.enable_batch_push, RPC_TIMEOUT_MS,
            _Acked(self, len(entries)))

    def _resend_overdue(self) -> None:
        mark = self.pusher.water_mark(self.term, self.peer)
        sent = self.pending.get(mark + 1)
        if sent is not None and _now_ms() - sent > self.pusher.config.max_push_time_out_ms:
            store = self.pusher.store
            last = min(store.ledger_end_index, self.write_index - 1)
            entries = [store.get(mark + 1)]
            if self.pusher.config.enable_batch_push:
                size = entries[0].compute_size()
                while size < self.pusher.config.max_batch_push_size and \
                        entries[-1].index < last:
                    entries.append(store.get(entries[-1].index + 1))
                    size += entries[-1].size
            self._resend(entries)

    def _do_commit(self) -> None:
        if _now_ms() - self.last_push_commit > 1000:
            self.last_push_commit = _now_ms()
            self.pusher.rpc.spawn_call(self.peer, RequestCode.PUSH,
                                          self._request(PushType.COMMIT))

    # ---- compare and truncate ---------------------------------------------------------
    async def _do_compare(self) -> None:
        store = self.pusher.store
        while self.state in (PushType.COMPARE, PushType.TRUNCATE) and self._fresh():
            if self.compare_index == -1 and store.ledger_end_index == -1:
                return
            if self.compare_index == -1 or not (
                    store.ledger_begin_index <= self.compare_index <= store.ledger_end_index):
                self.compare_index = store.ledger_end_index
            entry = store.get(self.compare_index)
            resp = await self.pusher.rpc.call(self.peer, RequestCode.PUSH,
                                                 self._request(PushType.COMPARE, entry))
            code = resp.code
            if code not in (Code.SUCCESS, Code.INCONSISTENT_STATE):
                raise DLedgerError(Code(code) if code in Code._value2member_map_ else Code.UNKNOWN,
                                   f"compare {self.compare_index}")
            begin, end = resp.begin_index, resp.end_index
            truncate_index = -1
            if code == Code.SUCCESS:
                if self.compare_index == end:
                    self._change(self.compare_index, PushType.APPEND)
                    return
                truncate_index = self.compare_index
            elif end < store.ledger_begin_index or begin > store.ledger_end_index:
                truncate_index = store.ledger_begin_index  # nothing in common
            elif self.compare_index < begin:
                truncate_index = store.ledger_begin_index
            elif self.compare_index > end:
                self.compare_index = end
            else:
                self.compare_index -= 1
            if self.compare_index < store.ledger_begin_index:
                truncate_index = store.ledger_begin_index
            if truncate_index != -1:
                self._change(truncate_index, PushType.TRUNCATE)
                await self._do_truncate(truncate_index)
                return

    async def _do_truncate(self, index: int) -> None:
        entry = self.pusher.store.get(index)
        resp = await self.pusher.rpc.call(self.peer, RequestCode.PUSH,
                                             self._request(PushType.TRUNCATE, entry))
        if resp.code != Code.SUCCESS:
            raise DLedgerError(Code.INCONSISTENT_STATE, f"truncate {index}: {resp.code}")
        log.info("[%s] truncated %s after index %d", self.pusher.ms.self_id, self.peer, index)
        self.last_push_commit = _now_ms()
        self._change(index, PushType.APPEND)


class _Acked(FrameWait):
    """The wait of one APPEND push of ``count`` entries in the response
    table: told the body of the follower's answer, read to (code, term,
    index), or None when none came (the push is resent when overdue).  The
    compiled answer lane tells a success itself (``dledger_frames.tell_acked``,
    the same steps without this one's and ``update_water_mark``'s frames)."""

    __slots__ = ("dispatcher", "count")

    def __init__(self, dispatcher: PeerDispatcher, count: int) -> None:
        self.dispatcher = dispatcher
        self.count = count if count > 1 else 1
        self.told = False

    def tell(self, body) -> None:
        self.told = True
        if body is None:
            return
        try:
            answer = read_push_answer(body)
            if answer is None:
                answer = push_answer(body)  # (None: an answer that does not bind, as none)
                if answer is None:
                    return
            code, term, index = answer
            d = self.dispatcher
            if code == _SUCCESS:
                if index is None:
                    index = -1
                d.pending.pop(index, None)
                pusher = d.pusher
                pusher.update_water_mark(term, d.peer, index + self.count - 1)
                if d.write_index <= pusher.store.ledger_end_index and not pusher._push_soon:
                    # pushes held back (MAX_PENDING in flight); while a push
                    # round is due, that round pushes them (or wakes it)
                    d.wake.set()
            elif code == Code.INCONSISTENT_STATE and d.state == PushType.APPEND:
                d._change(-1, PushType.COMPARE)
                d.wake.set()
        except Exception:  # noqa: BLE001 - one push's answer must not stop the connection's read
            log.exception("push answer failed")


if _frames is not None:
    _frames.bind_acked(_Acked, Role.LEADER, Code.TERM_CHANGED, EntryPusher, AckGroup)
_push = compiled("dledger_push")
if _push is not None:
    _push.bind_push(_Acked, Role.LEADER, PushType.APPEND, PushType.COMPARE, Channel, MAX_PENDING,
                    RPC_TIMEOUT_MS, PUSH_HEAD, PUSH_TAIL, OPAQUES)
EntryPusher._push_round = _push_round if _push is None else _push.push_round


class FollowerHandler:
    """A follower's side of PUSH (``EntryHandler``)."""

    def __init__(self, pusher: EntryPusher) -> None:
        self.pusher = pusher
        self.parked: dict[int, tuple[PushEntryRequest, asyncio.Future, asyncio.TimerHandle]] = {}

    def _response(self, req: PushEntryRequest, code: int) -> PushEntryResponse:
        store = self.pusher.store
        return push_response(req, code, store.ledger_begin_index, store.ledger_end_index)

    def handle(self, req: PushEntryRequest) -> PushEntryResponse | asyncio.Future:
        ms, store = self.pusher.ms, self.pusher.store
        push_type = req.type
        if not ms.is_follower():
            return self._response(req, Code.NOT_FOLLOWER)
        term, leader = req.term, req.leader_id or ""
        if push_type == PushType.COMMIT:
            store.update_committed_index(term, req.commit_index)
            self.pusher.on_committed(store.committed_index)
            return self._response(req, Code.SUCCESS)
        entries = req.entries()
        if not entries:
            return self._response(req, Code.UNEXPECTED_ARGUMENT)
        if push_type in (PushType.COMPARE, PushType.TRUNCATE):
            self._drop_parked()
            if push_type == PushType.COMPARE:
                try:
                    same = entries[0].same(store.get(entries[0].index))
                except DLedgerError:
                    same = False
                return self._response(req, Code.SUCCESS if same else Code.INCONSISTENT_STATE)
            try:
                store.truncate(entries[0], term, leader)
            except DLedgerError as exc:
                log.warning("truncate at %d refused: %s", entries[0].index, exc)
                return self._response(req, Code.INCONSISTENT_STATE)
            store.update_committed_index(term, req.commit_index)
            return self._response(req, Code.SUCCESS)
        if push_type != PushType.APPEND:
            return self._response(req, Code.UNEXPECTED_ARGUMENT)
        first = entries[0].index
        if first == store.ledger_end_index + 1:
            resp = self._apply(req, entries)
            self._drain()
            return resp
        if entries[-1].index <= store.ledger_end_index:  # a resend of what is here
            try:
                same = all(e.same(store.get(e.index)) for e in entries)
            except DLedgerError:
                same = False
            return self._response(req, Code.SUCCESS if same else Code.INCONSISTENT_STATE)
        if first in self.parked:
            return self._response(req, Code.REPEATED_PUSH)
        fut = asyncio.get_running_loop().create_future()
        timer = asyncio.get_running_loop().call_later(1.0, self._expire, first)
        self.parked[first] = (req, fut, timer)
        return fut

    def _apply(self, req: PushEntryRequest, entries: list[Entry]) -> PushEntryResponse:
        store = self.pusher.store
        term, leader = req.term, req.leader_id or ""
        try:
            store.append_all_as_follower(entries, term, leader)
        except DLedgerError as exc:
            log.info("append %d refused: %s", entries[0].index, exc)
            return self._response(req, Code.INCONSISTENT_STATE)
        before = store.committed_index
        store.update_committed_index(term, req.commit_index)
        if store.committed_index != before:
            self.pusher.on_committed(store.committed_index)
        return self._response(req, Code.SUCCESS)

    def _drain(self) -> None:
        store = self.pusher.store
        while (item := self.parked.pop(store.ledger_end_index + 1, None)) is not None:
            req, fut, timer = item
            timer.cancel()
            if not fut.done():
                fut.set_result(self._apply(req, req.entries()))

    def _expire(self, first: int) -> None:
        item = self.parked.pop(first, None)
        if item is not None and not item[1].done():
            item[1].set_result(self._response(item[0], Code.INCONSISTENT_STATE))

    def _drop_parked(self) -> None:
        for req, fut, timer in self.parked.values():
            timer.cancel()
            if not fut.done():
                fut.set_result(self._response(req, Code.INCONSISTENT_STATE))
        self.parked.clear()
