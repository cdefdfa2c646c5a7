"""DLedgerEntryPusher: log replication by push from the leader (DLedger 0.3.1.2).

Leader side, one dispatcher per follower, in one of three states:

* COMPARE — find the last index where the follower holds the leader's entry
  (walking back from the leader's end, using the follower's begin and end);
* TRUNCATE — make that entry the follower's last, dropping a divergent tail;
* APPEND — push entries in order (pipelined up to 1,000 in flight, or in
  batches with ``enableBatchPush``), resend one not acknowledged within
  ``maxPushTimeOutMs``, and send COMMIT once a second when idle.

Each acknowledgement raises the follower's water mark for the term; the
quorum checker takes the median water mark as the committed index and
completes the appends waiting for it (``maxWaitAckTimeMs`` later they fail
with WAIT_QUORUM_ACK_TIMEOUT).  Follower side, pushes are applied in index
order; one that arrives early waits for the gap to close.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from rmq.dledger.entry import Entry
from rmq.dledger.messages import (
    PushEntryRequest,
    PushEntryResponse,
    push_request,
    push_response,
)
from rmq.dledger.protocol import Code, DLedgerError, PushType, RequestCode

if TYPE_CHECKING:
    from rmq.dledger.config import DLedgerConfig
    from rmq.dledger.member_state import MemberState
    from rmq.dledger.mmap_store import DLedgerMmapFileStore
    from rmq.dledger.rpc import PeerRpc

log = logging.getLogger("rmq.dledger")

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
        if fut is not None and not fut.done():
            fut.set_result(None)
        else:
            self._pending = True

    async def wait(self, timeout: float) -> None:
        if self._pending:
            self._pending = False
            return
        loop = asyncio.get_running_loop()
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


class AppendWaiter:
    """An append waiting for its quorum: a future and a deadline."""

    __slots__ = ("future", "deadline", "entry")

    def __init__(self, entry: Entry, timeout_ms: int) -> None:
        self.entry = entry
        self.future: asyncio.Future = asyncio.get_running_loop().create_future()
        self.deadline = _now_ms() + timeout_ms


class EntryPusher:
    def __init__(self, config: DLedgerConfig, member_state: MemberState,
                 store: DLedgerMmapFileStore, rpc: PeerRpc,
                 on_committed: Callable[[int], None]) -> None:
        """``on_committed(index)``: told each time the committed index moves."""
        self.rpc = rpc
        self.ms = member_state
        self.store = store
        self.config = config
        self.on_committed = on_committed
        self.water_marks: dict[int, dict[str, int]] = {}  # term -> peer -> acknowledged index
        self.waiters: dict[int, dict[int, AppendWaiter]] = {}  # term -> index -> waiter
        self.dispatchers = {peer: PeerDispatcher(self, peer) for peer in self.ms.others()}
        self.handler = FollowerHandler(self)
        self._timer: asyncio.Task | None = None

    def start(self) -> None:
        for d in self.dispatchers.values():
            d.start()
        self._timer = asyncio.get_running_loop().create_task(self._expire_waiters())

    async def shutdown(self) -> None:
        tasks = [d.task for d in self.dispatchers.values() if d.task is not None]
        if self._timer is not None:
            tasks.append(self._timer)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for by_index in self.waiters.values():
            for w in by_index.values():
                if not w.future.done():
                    w.future.set_exception(DLedgerError(Code.TERM_CHANGED, "shutting down"))

    # ---- water marks and the committed index --------------------------------
    def _marks(self, term: int) -> dict[str, int]:
        marks = self.water_marks.get(term)
        if marks is None:
            marks = self.water_marks[term] = dict.fromkeys(self.ms.peer_map, -1)
            for old in [t for t in self.water_marks if t != term]:
                del self.water_marks[old]
        return marks

    def update_water_mark(self, term: int, peer: str, index: int) -> None:
        marks = self._marks(term)
        if marks[peer] < index:
            marks[peer] = index
            if self.ms.is_leader() and term == self.ms.curr_term:
                self._check_quorum()

    def water_mark(self, term: int, peer: str) -> int:
        return self._marks(term)[peer]

    def _check_quorum(self) -> None:
        """Commit the median water mark and complete the appends it covers."""
        term = self.ms.curr_term
        own = self._marks(term)
        own[self.ms.self_id] = max(own[self.ms.self_id], self.store.ledger_end_index)
        marks = sorted(own.values(), reverse=True)
        quorum_index = marks[len(marks) // 2]
        before = self.store.committed_index
        self.store.update_committed_index(term, quorum_index)
        waiting = self.waiters.get(term)
        if waiting:
            for index in [i for i in waiting if i <= quorum_index]:
                w = waiting.pop(index)
                if not w.future.done():
                    w.future.set_result(w.entry)
        if self.store.committed_index != before:
            self.on_committed(self.store.committed_index)

    # ---- appends on the leader ------------------------------------------------
    def pending_full(self) -> bool:
        return len(self.waiters.get(self.ms.curr_term, ())) > self.config.max_pending_requests_num

    def wait_ack(self, entry: Entry) -> asyncio.Future:
        """A future completed with ``entry`` once a quorum holds it."""
        for old in [t for t in self.waiters if t != entry.term]:
            for w in self.waiters.pop(old).values():  # TERM_CHANGED, as the ack checker does
                if not w.future.done():
                    w.future.set_exception(DLedgerError(Code.TERM_CHANGED))
        waiter = AppendWaiter(entry, self.config.max_wait_ack_time_ms)
        self.waiters.setdefault(entry.term, {})[entry.index] = waiter
        self.update_water_mark(entry.term, self.ms.self_id, entry.index)
        for d in self.dispatchers.values():
            d.wake.set()
        return waiter.future

    async def _expire_waiters(self) -> None:
        """Every 50 ms: fail appends past their wait, and (as the ack checker's
        leak check does) count the leader's own log, so that entries a new
        leader inherited commit without waiting for a new append."""
        while True:
            await asyncio.sleep(0.05)
            if self.ms.is_leader():
                self._check_quorum()
            now = _now_ms()
            for term, by_index in list(self.waiters.items()):
                for index in [i for i, w in by_index.items() if w.deadline < now]:
                    w = by_index.pop(index)
                    if not w.future.done():
                        w.future.set_exception(DLedgerError(
                            Code.WAIT_QUORUM_ACK_TIMEOUT if term == self.ms.curr_term
                            else Code.TERM_CHANGED, f"index {index}"))

    def on_role_change(self) -> None:
        """Appends of an old leadership fail now; dispatchers look again."""
        for term in [t for t in self.waiters if not self.ms.is_leader()
                     or t != self.ms.curr_term]:
            for w in self.waiters.pop(term).values():
                if not w.future.done():
                    w.future.set_exception(DLedgerError(Code.TERM_CHANGED))
        for d in self.dispatchers.values():
            d.wake.set()


class PeerDispatcher:
    """The leader's replication to one follower (``EntryDispatcher``)."""

    def __init__(self, pusher: EntryPusher, peer: str) -> None:
        self.pusher = pusher
        self.peer = peer
        self.state = PushType.COMPARE
        self.term = -1
        self.write_index = -1
        self.compare_index = -1
        self.pending: dict[int, float] = {}  # first index of a push in flight -> sent at
        self.last_push_commit = 0.0
        self.wake = Wakeup()
        self.task: asyncio.Task | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run(),
                                                           name=f"dledgerPush-{self.peer}")

    async def _run(self) -> None:
        while True:
            try:
                if self._fresh():
                    if self.state == PushType.APPEND:
                        self._do_append()
                    else:
                        await self._do_compare()
                await self.wake.wait(IDLE_S)
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
    def _do_append(self) -> None:
        store, config = self.pusher.store, self.pusher.config
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
            entries = [store.get(self.write_index)]
            if config.enable_batch_push:
                size = entries[0].compute_size()
                while size < config.max_batch_push_size and \
                        self.write_index + len(entries) <= store.ledger_end_index:
                    entries.append(store.get(self.write_index + len(entries)))
                    size += entries[-1].size
            self._send(entries)
            self.write_index += len(entries)

    def _send(self, entries: list[Entry]) -> None:
        batch = len(entries) > 1 or self.pusher.config.enable_batch_push
        request = self._request(PushType.APPEND, None if batch else entries[0],
                                entries if batch else None)
        self.pending[entries[0].index] = _now_ms()
        self.last_push_commit = _now_ms()
        task = self.pusher.rpc.spawn_call(self.peer, RequestCode.PUSH, request)
        task.add_done_callback(lambda t, n=len(entries): self._appended(t, n))

    def _appended(self, task: asyncio.Future, count: int) -> None:
        if task.cancelled() or task.exception() is not None:
            return  # resent when overdue
        resp = task.result()
        code = resp.code
        if code == Code.SUCCESS:
            index = -1 if resp.index is None else resp.index
            self.pending.pop(index, None)
            self.pusher.update_water_mark(resp.term, self.peer, index + max(count, 1) - 1)
            self.wake.set()
        elif code == Code.INCONSISTENT_STATE and self.state == PushType.APPEND:
            self._change(-1, PushType.COMPARE)
            self.wake.set()

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
            self._send(entries)

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
            for entry in entries:
                store.append_as_follower(entry, term, leader)
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
