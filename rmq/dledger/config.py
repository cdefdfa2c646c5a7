"""DLedger's settings (0.3.1.2 ``DLedgerConfig``) and the checks rmq makes
before a node starts: the peer list must parse, name this node, and hold
each id once."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from rmq.dledger.entry import INDEX_UNIT_SIZE


class DLedgerConfigError(ValueError):
    """A DLedger setting that cannot work; the message is one line."""


def parse_peers(peers: str) -> dict[str, str]:
    """``n0-127.0.0.1:40911;n1-127.0.0.1:40912`` -> {id: address}."""
    table: dict[str, str] = {}
    for item in (p.strip() for p in (peers or "").split(";")):
        if not item:
            continue
        peer_id, sep, addr = item.partition("-")
        host, colon, port = addr.rpartition(":")
        if not sep or not peer_id or not colon or not host or not port.isdigit():
            raise DLedgerConfigError(f"bad DLedger peer {item!r}: use id-host:port")
        if peer_id in table:
            raise DLedgerConfigError(f"DLedger peer id {peer_id} is listed twice in {peers!r}")
        table[peer_id] = addr
    if not table:
        raise DLedgerConfigError("dLegerPeers is empty: list the group as n0-host:port;...")
    return table


@dataclass
class DLedgerConfig:
    group: str = "default"
    self_id: str = "n0"
    peers: str = "n0-localhost:20911"
    store_base_dir: str = os.path.join(os.sep, "tmp", "dledgerstore")
    data_store_path: str | None = None  # storePathDLedgerCommitLog; default <base>/dledger-<id>/data
    mapped_file_size_for_entry_data: int = 1024 * 1024 * 1024
    mapped_file_size_for_entry_index: int = INDEX_UNIT_SIZE * 5 * 1024 * 1024
    max_pending_requests_num: int = 10000
    max_wait_ack_time_ms: int = 2500
    max_push_time_out_ms: int = 1000
    heart_beat_time_interval_ms: int = 2000
    max_heart_beat_leak: int = 3
    min_vote_interval_ms: int = 300
    max_vote_interval_ms: int = 1000
    preferred_leader_ids: str | None = None
    max_leadership_transfer_wait_index: int = 1000
    min_take_leadership_vote_interval_ms: int = 30
    max_take_leadership_vote_interval_ms: int = 100
    leadership_transfer_wait_timeout: int = 1000
    enable_batch_push: bool = False
    flush_file_interval_ms: int = 10  # flushFileInterval
    max_batch_push_size: int = 4 * 1024
    peer_map: dict[str, str] = field(default_factory=dict)

    def validate(self) -> None:
        """Fill ``peer_map``; DLedgerConfigError when the group cannot work."""
        self.peer_map = parse_peers(self.peers)
        if self.self_id not in self.peer_map:
            raise DLedgerConfigError(
                f"dLegerSelfId {self.self_id} is not in dLegerPeers {self.peers}")
        for preferred in (self.preferred_leader_ids or "").split(";"):
            if preferred.strip() and preferred.strip() not in self.peer_map:
                raise DLedgerConfigError(f"preferredLeaderId {preferred.strip()} is not a peer")
        if self.min_vote_interval_ms >= self.max_vote_interval_ms:
            raise DLedgerConfigError("minVoteIntervalMs must be below maxVoteIntervalMs")

    @property
    def default_path(self) -> str:
        return os.path.join(self.store_base_dir, f"dledger-{self.self_id}")

    @property
    def data_path(self) -> str:
        return self.data_store_path or os.path.join(self.default_path, "data")

    @property
    def index_path(self) -> str:
        return os.path.join(self.default_path, "index")

    @property
    def self_addr(self) -> str:
        return self.peer_map[self.self_id]
