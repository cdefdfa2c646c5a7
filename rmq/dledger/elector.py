"""DLedgerLeaderElector: terms, votes and heartbeats (DLedger 0.3.1.2).

One task runs the state machine every 10 ms, as DLedger's StateMaintainer:

* a candidate asks every peer for its vote at a randomized time (300-1000 ms
  apart by default) and becomes leader with a quorum of ACCEPTs; a vote is
  refused to a candidate whose log is behind (ledger end term, then index);
* a leader sends heartbeats every ``heartBeatTimeIntervalMs`` and steps down
  when a quorum has not answered for ``maxHeartBeatLeak`` intervals;
* a follower becomes a candidate when its leader has been silent that long.

Higher terms seen in any answer make the node a candidate of that term, and
the preferred leader takes leadership over with a faster vote cadence.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from rmq.dledger.member_state import Role
from rmq.dledger.messages import (
    HeartBeatRequest,
    HeartBeatResponse,
    VoteRequest,
    VoteResponse,
    bare,
    base,
    reply_to,
)
from rmq.dledger.protocol import Code, RequestCode, VoteResult

if TYPE_CHECKING:
    from rmq.dledger.config import DLedgerConfig
    from rmq.dledger.member_state import MemberState
    from rmq.dledger.rpc import PeerRpc

log = logging.getLogger("rmq.dledger")

WAIT_TO_REVOTE, REVOTE_IMMEDIATELY, PASSED, WAIT_TO_VOTE_NEXT = range(4)
TICK_S = 0.01


def _now_ms() -> float:
    return time.monotonic() * 1000


class LeaderElector:
    def __init__(self, config: DLedgerConfig, member_state: MemberState, rpc: PeerRpc) -> None:
        self.rpc = rpc
        self.ms = member_state
        self.config = config
        self.last_leader_heartbeat = _now_ms()
        self.last_send_heartbeat = -1.0
        self.last_succ_heartbeat = -1.0
        self.next_time_to_vote = -1.0
        self.need_increase_term = False
        self.last_parse = WAIT_TO_REVOTE
        self.role_handlers: list[Callable[[int, Role], None]] = []
        self._task: asyncio.Task | None = None

    # ---- lifecycle -------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="dledgerElector")

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            try:
                if self.ms.is_leader():
                    await self._maintain_as_leader()
                elif self.ms.is_follower():
                    self._maintain_as_follower()
                else:
                    await self._maintain_as_candidate()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the state machine must keep running
                log.exception("dledger state maintainer failed")
            await asyncio.sleep(TICK_S)

    # ---- role changes ------------------------------------------------------------
    def _role_changed(self, term: int, role: Role) -> None:
        log.info("[%s] role %s in term %d (leader %s)", self.ms.self_id, role.value, term,
                 self.ms.leader_id)
        for handler in self.role_handlers:
            try:
                handler(term, role)
            except Exception:  # noqa: BLE001 - one handler must not stop the others
                log.exception("role change handler failed")

    def change_to_leader(self, term: int) -> None:
        if self.ms.curr_term == term:
            self.ms.change_to_leader(term)
            self.last_send_heartbeat = -1
            self._role_changed(term, Role.LEADER)

    def change_to_candidate(self, term: int) -> None:
        if term >= self.ms.curr_term:
            self.ms.change_to_candidate(term)
            self._role_changed(term, Role.CANDIDATE)

    def change_to_follower(self, term: int, leader_id: str) -> None:
        self.last_parse = WAIT_TO_REVOTE
        self.ms.change_to_follower(term, leader_id)
        self.last_leader_heartbeat = _now_ms()
        self._role_changed(term, Role.FOLLOWER)

    # ---- handlers -------------------------------------------------------------------
    def handle_heartbeat(self, req: HeartBeatRequest) -> HeartBeatResponse:
        """Answers shaped as 0.3.1.2's ``new HeartBeatResponse()``: code and
        term only (term -1 unless the answer names this node's term)."""
        ms, term, leader = self.ms, req.term, req.leader_id

        def answer(code: int = Code.SUCCESS, at: int = -1) -> HeartBeatResponse:
            return bare(HeartBeatResponse, code, at)

        if not ms.is_peer(leader):
            return answer(Code.UNKNOWN_MEMBER, ms.curr_term)
        if leader == ms.self_id:
            return answer(Code.UNEXPECTED_MEMBER, ms.curr_term)
        if term < ms.curr_term:
            return answer(Code.EXPIRED_TERM, ms.curr_term)
        if term == ms.curr_term:
            if ms.leader_id is None:
                self.change_to_follower(term, leader)
                return answer()
            if leader == ms.leader_id:
                self.last_leader_heartbeat = _now_ms()
                return answer()
            return answer(Code.INCONSISTENT_LEADER)
        self.change_to_candidate(term)  # a newer term: catch up first, then follow
        self.need_increase_term = True
        return answer(Code.TERM_NOT_READY)

    def handle_vote(self, req: VoteRequest, own: bool = False) -> VoteResponse:
        ms = self.ms
        term, leader = req.term, req.leader_id
        end_term, end_index = req.ledger_end_term, req.ledger_end_index

        def answer(result: str, at: int | None = None) -> VoteResponse:
            return reply_to(req, VoteResponse, None, ms.curr_term if at is None else at,
                            vote_result=result)

        if not ms.is_peer(leader):
            return answer(VoteResult.REJECT_UNKNOWN_LEADER)
        if not own and leader == ms.self_id:
            return answer(VoteResult.REJECT_UNEXPECTED_LEADER)
        if end_term < ms.ledger_end_term:
            return answer(VoteResult.REJECT_EXPIRED_LEDGER_TERM)
        if end_term == ms.ledger_end_term and end_index < ms.ledger_end_index:
            return answer(VoteResult.REJECT_SMALL_LEDGER_END_INDEX)
        if term < ms.curr_term:
            return answer(VoteResult.REJECT_EXPIRED_VOTE_TERM)
        if term == ms.curr_term:
            if ms.vote_for is not None and ms.vote_for != leader:
                return answer(VoteResult.REJECT_ALREADY_HAS_LEADER if ms.leader_id is not None
                              else VoteResult.REJECT_ALREADY_VOTED)
        else:
            self.change_to_candidate(term)
            self.need_increase_term = True
            return answer(VoteResult.REJECT_TERM_NOT_READY)
        if term < ms.ledger_end_term:
            return answer(VoteResult.REJECT_TERM_SMALL_THAN_LEDGER, ms.ledger_end_term)
        if not own and self.taking_leadership() and end_term == ms.ledger_end_term \
                and ms.ledger_end_index >= end_index:
            return answer(VoteResult.REJECT_TAKING_LEADERSHIP)
        ms.set_vote_for(leader)
        return answer(VoteResult.ACCEPT)

    # ---- leader -------------------------------------------------------------------------
    async def _maintain_as_leader(self) -> None:
        if _now_ms() - self.last_send_heartbeat <= self.config.heart_beat_time_interval_ms:
            return
        self.last_send_heartbeat = _now_ms()
        await self._send_heartbeats(self.ms.curr_term, self.ms.self_id)

    async def _send_heartbeats(self, term: int, leader_id: str) -> None:
        ms = self.ms
        succ, not_ready, max_term, inconsistent = 1, 0, -1, False
        calls = {self.rpc.spawn_call(
            peer, RequestCode.HEART_BEAT,
            base(HeartBeatRequest, ms.group, ms.self_id, peer, leader_id, term)): peer
            for peer in ms.others()}
        deadline = self.config.heart_beat_time_interval_ms / 1000
        pending = set(calls)
        start = time.monotonic()
        while pending and not (ms.is_quorum(succ) or ms.is_quorum(succ + not_ready)):
            done, pending = await asyncio.wait(
                pending, timeout=max(0.0, deadline - (time.monotonic() - start)),
                return_when=asyncio.FIRST_COMPLETED)
            if not done:
                break
            for fut in done:
                peer = calls[fut]
                if fut.exception() is not None:
                    ms.peers_live[peer] = False
                    continue
                resp = fut.result()
                code = resp.code
                ms.peers_live[peer] = code != Code.NETWORK_ERROR
                if code == Code.SUCCESS:
                    succ += 1
                elif code == Code.EXPIRED_TERM:
                    max_term = max(max_term, resp.term)
                elif code == Code.INCONSISTENT_LEADER:
                    inconsistent = True
                elif code == Code.TERM_NOT_READY:
                    not_ready += 1
        for fut in pending:
            fut.cancel()
        if ms.is_quorum(succ):
            self.last_succ_heartbeat = _now_ms()
            return
        if ms.is_quorum(succ + not_ready):
            self.last_send_heartbeat = -1
        elif max_term > term:
            self.change_to_candidate(max_term)
        elif inconsistent:
            self.change_to_candidate(term)
        elif _now_ms() - self.last_succ_heartbeat > \
                self.config.max_heart_beat_leak * self.config.heart_beat_time_interval_ms:
            self.change_to_candidate(term)

    # ---- follower ------------------------------------------------------------------------
    def _maintain_as_follower(self) -> None:
        silent = _now_ms() - self.last_leader_heartbeat
        if silent > self.config.max_heart_beat_leak * self.config.heart_beat_time_interval_ms:
            self.change_to_candidate(self.ms.curr_term)

    # ---- candidate -------------------------------------------------------------------------
    def taking_leadership(self) -> bool:
        preferred = self.config.preferred_leader_ids
        return bool(preferred) and self.ms.term_to_take_leadership == self.ms.curr_term \
            and self.ms.self_id in preferred.split(";")

    def _next_vote_time(self) -> float:
        c = self.config
        if self.taking_leadership():
            return _now_ms() + random.randint(c.min_take_leadership_vote_interval_ms,
                                              c.max_take_leadership_vote_interval_ms - 1)
        return _now_ms() + random.randint(c.min_vote_interval_ms, c.max_vote_interval_ms - 1)

    async def _maintain_as_candidate(self) -> None:
        ms = self.ms
        if _now_ms() < self.next_time_to_vote and not self.need_increase_term:
            return
        if self.last_parse == WAIT_TO_VOTE_NEXT or self.need_increase_term:
            term = ms.next_term()
            self.last_parse = WAIT_TO_REVOTE
        else:
            term = ms.curr_term
        if self.need_increase_term:
            self.next_time_to_vote = self._next_vote_time()
            self.need_increase_term = False
            return
        parse = await self._collect_votes(term, ms.ledger_end_term, ms.ledger_end_index)
        self.last_parse = parse
        if parse == PASSED and ms.is_candidate():
            self.change_to_leader(term)

    async def _collect_votes(self, term: int, end_term: int, end_index: int) -> int:
        ms, config = self.ms, self.config
        answers: list[asyncio.Future] = []
        for peer in ms.peer_map:
            req = base(VoteRequest, ms.group, ms.self_id, peer, ms.self_id, term,
                       ledger_end_index=end_index, ledger_end_term=end_term)
            if peer == ms.self_id:
                fut = asyncio.get_running_loop().create_future()
                fut.set_result(self.handle_vote(req, own=True))
            else:
                fut = self.rpc.spawn_call(peer, RequestCode.VOTE, req)
            answers.append(fut)
        known_max, valid, accepted, not_ready, bigger_ledger = term, 0, 0, 0, 0
        has_leader = False
        pending = set(answers)
        start = time.monotonic()
        limit = (2000 + random.randint(0, config.max_vote_interval_ms)) / 1000
        while pending and not (has_leader or ms.is_quorum(accepted)
                               or ms.is_quorum(accepted + not_ready)):
            done, pending = await asyncio.wait(
                pending, timeout=max(0.0, limit - (time.monotonic() - start)),
                return_when=asyncio.FIRST_COMPLETED)
            if not done:
                break
            for fut in done:
                if fut.exception() is not None:
                    continue
                resp = fut.result()
                result = resp.vote_result
                if result != VoteResult.UNKNOWN:
                    valid += 1
                if result == VoteResult.ACCEPT:
                    accepted += 1
                elif result == VoteResult.REJECT_ALREADY_HAS_LEADER:
                    has_leader = True
                elif result in (VoteResult.REJECT_TERM_SMALL_THAN_LEDGER,
                                VoteResult.REJECT_EXPIRED_VOTE_TERM):
                    known_max = max(known_max, resp.term)
                elif result in (VoteResult.REJECT_EXPIRED_LEDGER_TERM,
                                VoteResult.REJECT_SMALL_LEDGER_END_INDEX):
                    bigger_ledger += 1
                elif result == VoteResult.REJECT_TERM_NOT_READY:
                    not_ready += 1
        for fut in pending:
            fut.cancel()
        if known_max > term:
            self.next_time_to_vote = self._next_vote_time()
            self.change_to_candidate(known_max)
            return WAIT_TO_VOTE_NEXT
        if has_leader:
            self.next_time_to_vote = self._next_vote_time() + \
                config.heart_beat_time_interval_ms * config.max_heart_beat_leak
            return WAIT_TO_REVOTE
        if not ms.is_quorum(valid):
            self.next_time_to_vote = self._next_vote_time()
            return WAIT_TO_REVOTE
        if not ms.is_quorum(valid - bigger_ledger):
            self.next_time_to_vote = self._next_vote_time() + config.max_vote_interval_ms
            return WAIT_TO_REVOTE
        if ms.is_quorum(accepted):
            return PASSED
        if ms.is_quorum(accepted + not_ready):
            return REVOTE_IMMEDIATELY
        self.next_time_to_vote = self._next_vote_time()
        return WAIT_TO_VOTE_NEXT
