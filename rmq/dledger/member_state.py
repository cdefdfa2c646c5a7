"""MemberState: this node's role, term, vote and view of the group (DLedger
0.3.1.2).  The term and the vote are persisted in ``currterm`` under the
node's directory before they take effect, so a restarted node never votes
twice in one term."""

from __future__ import annotations

import logging
import os
from enum import Enum

from rmq.common.config_manager import write_file_safely
from rmq.common.properties import ConfigError, load_properties
from rmq.dledger.config import DLedgerConfig

log = logging.getLogger("rmq.dledger")

TERM_FILE = "currterm"


class Role(Enum):
    CANDIDATE = "CANDIDATE"
    LEADER = "LEADER"
    FOLLOWER = "FOLLOWER"


class MemberState:
    # the fields a leader's append reads and sets (``dledger_append.append_run``)
    # and its quorum check reads (``dledger_frames.check_quorum``) as slots, read
    # there at their offsets; the others in the instance dict
    __slots__ = ("role", "transferee", "curr_term", "peer_map", "ledger_end_index",
                 "ledger_end_term", "self_id", "__dict__")

    def __init__(self, config: DLedgerConfig) -> None:
        self.config = config
        self.group = config.group
        self.self_id = config.self_id
        self.peer_map = dict(config.peer_map)
        self.role = Role.CANDIDATE
        self.leader_id: str | None = None
        self.curr_term = 0
        self.vote_for: str | None = None
        self.ledger_end_index = -1
        self.ledger_end_term = -1
        self.known_max_term = -1
        self.transferee: str | None = None
        self.term_to_take_leadership = -1
        self.peers_live: dict[str, bool] = {}
        self._load_term()

    # --- persistence ------------------------------------------------------------
    @property
    def term_file(self) -> str:
        return os.path.join(self.config.default_path, TERM_FILE)

    def _load_term(self) -> None:
        try:
            props = load_properties(self.term_file)
        except ConfigError:  # none yet (or unreadable: DLedger starts from term 0 too)
            return
        if props.get("currTerm", "").strip().lstrip("-").isdigit():
            self.curr_term = int(props["currTerm"])
        self.vote_for = props.get("voteLeader") or None

    def _persist_term(self) -> None:
        os.makedirs(self.config.default_path, exist_ok=True)
        write_file_safely(f"currTerm={self.curr_term}\nvoteLeader={self.vote_for or ''}\n",
                          self.term_file)

    # --- transitions ------------------------------------------------------------
    def set_vote_for(self, leader_id: str) -> None:
        self.vote_for = leader_id
        self._persist_term()

    def next_term(self) -> int:
        """A candidate's new term: the highest term heard of, else one more."""
        if self.role is not Role.CANDIDATE:
            raise RuntimeError(f"next term as {self.role.value}")
        self.curr_term = self.known_max_term if self.known_max_term > self.curr_term \
            else self.curr_term + 1
        self.vote_for = None
        self._persist_term()
        return self.curr_term

    def change_to_leader(self, term: int) -> None:
        assert term == self.curr_term
        self.role = Role.LEADER
        self.leader_id = self.self_id
        self.peers_live.clear()

    def change_to_follower(self, term: int, leader_id: str) -> None:
        """A follower of ``leader_id`` in ``term`` (adopted and persisted when newer)."""
        if term > self.curr_term:
            self.curr_term = term
            self.vote_for = None
            self._persist_term()
        self.role = Role.FOLLOWER
        self.leader_id = leader_id
        self.transferee = None

    def change_to_candidate(self, term: int) -> None:
        if term > self.known_max_term:
            self.known_max_term = term
        self.role = Role.CANDIDATE
        self.leader_id = None
        self.transferee = None

    # --- views ---------------------------------------------------------------------
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    def is_follower(self) -> bool:
        return self.role is Role.FOLLOWER

    def is_candidate(self) -> bool:
        return self.role is Role.CANDIDATE

    def is_peer(self, peer_id: str | None) -> bool:
        return peer_id in self.peer_map

    def is_quorum(self, count: int) -> bool:
        return count >= len(self.peer_map) // 2 + 1

    def leader_addr(self) -> str | None:
        return self.peer_map.get(self.leader_id) if self.leader_id else None

    def others(self) -> list[str]:
        return [p for p in self.peer_map if p != self.self_id]
