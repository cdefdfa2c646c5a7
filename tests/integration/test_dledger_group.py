"""A three-node DLedger group on loopback, each link between two nodes through
a TCP proxy the test can cut: election, replication and commit, a leader cut
off in a minority (it cannot commit; its divergent tail is truncated when the
link heals), and the preferred leader taking leadership over."""

from __future__ import annotations

import asyncio
import time

import pytest

from rmq.dledger.config import DLedgerConfig
from rmq.dledger.protocol import Code, DLedgerError
from rmq.dledger.server import DLedgerServer
from rmq.testing.procs import free_port
from rmq.testing.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]

IDS = ("n0", "n1", "n2")


class Group:
    """Three servers; node i reaches node j through ``links[(i, j)]``."""

    def __init__(self, tmp_path, **settings) -> None:
        self.tmp = tmp_path
        self.settings = settings
        self.ports = {i: free_port() for i in IDS}
        self.links: dict[tuple[str, str], TcpProxy] = {}
        self.servers: dict[str, DLedgerServer] = {}

    async def start(self) -> Group:
        for a in IDS:
            for b in IDS:
                if a != b:
                    self.links[(a, b)] = await TcpProxy(self.ports[b]).start()
        for node in IDS:
            await self.start_node(node)
        return self

    def config(self, node: str) -> DLedgerConfig:
        peers = ";".join(f"{p}-127.0.0.1:{self.ports[p] if p == node else self.links[(node, p)].port}"
                         for p in IDS)
        settings = dict(heart_beat_time_interval_ms=200, min_vote_interval_ms=100,
                        max_vote_interval_ms=300, max_wait_ack_time_ms=1500,
                        mapped_file_size_for_entry_data=256 * 1024,
                        mapped_file_size_for_entry_index=32 * 4096)
        settings.update(self.settings)
        return DLedgerConfig(group="g", self_id=node, peers=peers,
                             store_base_dir=str(self.tmp), **settings)

    async def start_node(self, node: str) -> None:
        server = DLedgerServer(self.config(node))
        await server.start()
        self.servers[node] = server

    async def close(self) -> None:
        for server in self.servers.values():
            await server.shutdown()
        for link in self.links.values():
            await link.close()

    def isolate(self, node: str, cut: bool = True) -> None:
        for (a, b), link in self.links.items():
            if node in (a, b):
                link.cut() if cut else link.heal()

    async def leader(self, among=IDS, timeout: float = 10.0) -> DLedgerServer:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            leaders = [self.servers[n] for n in among if self.servers[n].member_state.is_leader()]
            if len(leaders) == 1:
                return leaders[0]
            await asyncio.sleep(0.02)
        raise AssertionError(f"no single leader among {among}")

    def log(self, node: str) -> list[tuple[int, bytes, int]]:
        store = self.servers[node].store
        if store.ledger_end_index < 0:
            return []
        return [(store.get(i).term, store.get(i).body, store.get(i).pos)
                for i in range(store.ledger_begin_index, store.ledger_end_index + 1)]

    async def converged(self, nodes=IDS, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            logs = [self.log(n) for n in nodes]
            if all(log == logs[0] for log in logs):
                committed = {self.servers[n].store.committed_index for n in nodes}
                if committed == {len(logs[0]) - 1}:
                    return
            await asyncio.sleep(0.05)
        raise AssertionError({n: (len(self.log(n)), self.servers[n].store.committed_index)
                              for n in nodes})


@pytest.fixture
async def group(tmp_path):
    g = await Group(tmp_path).start()
    try:
        yield g
    finally:
        await g.close()


async def test_elects_one_leader_and_replicates_every_entry(group):
    leader = await group.leader()
    terms = {s.member_state.curr_term for s in group.servers.values()}
    assert len(terms) == 1
    for i in range(100):
        entry = await leader.append(f"sync {i}".encode())
        assert entry.index == i
    results = await asyncio.gather(*(leader.append(b"x" * 1000) for _ in range(300)))
    assert [e.index for e in results] == list(range(100, 400))
    await group.converged()
    assert group.log("n0")[5][1] == b"sync 5"


async def test_a_leader_cut_off_cannot_commit_and_its_tail_is_truncated(group):
    old = await group.leader()
    for i in range(10):
        await old.append(f"before {i}".encode())
    await group.converged()
    cut_id = old.member_state.self_id
    group.isolate(cut_id)
    with pytest.raises(DLedgerError) as err:
        await old.append(b"never committed")  # held by the cut-off leader alone
    assert err.value.code in (Code.WAIT_QUORUM_ACK_TIMEOUT, Code.TERM_CHANGED)
    assert old.store.ledger_end_index == 10 and old.store.committed_index == 9
    rest = [n for n in IDS if n != cut_id]
    started = time.monotonic()
    new = await group.leader(rest)
    elected_after = time.monotonic() - started
    assert new.member_state.curr_term > 1 and elected_after < 10
    for i in range(20):
        await new.append(f"after {i}".encode())
    assert old.store.committed_index == 9  # the minority never committed anything more
    group.isolate(cut_id, cut=False)
    await group.converged()
    bodies = [body for _, body, _ in group.log(cut_id)]
    assert b"never committed" not in bodies
    assert bodies[:10] == [f"before {i}".encode() for i in range(10)]
    assert bodies[10:] == [f"after {i}".encode() for i in range(20)]


async def test_a_follower_restarted_catches_up(group):
    leader = await group.leader()
    follower = next(n for n in IDS if n != leader.member_state.self_id)
    await group.servers[follower].shutdown()
    for i in range(50):
        await leader.append(f"while down {i}".encode())  # a quorum of two still commits
    await group.start_node(follower)
    await group.converged()
    assert group.servers[follower].member_state.is_follower()


async def test_the_preferred_leader_takes_over(tmp_path):
    g = await Group(tmp_path, preferred_leader_ids="n2").start()
    try:
        first = await g.leader()
        await first.append(b"one")
        deadline = time.monotonic() + 20
        while not g.servers["n2"].member_state.is_leader():
            assert time.monotonic() < deadline, "n2 never took leadership over"
            await asyncio.sleep(0.05)
        leader = await g.leader()
        assert leader.member_state.self_id == "n2"
        await leader.append(b"two")
        await g.converged()
        assert [body for _, body, _ in g.log("n0")] == [b"one", b"two"]
    finally:
        await g.close()


async def test_batch_push_replicates_the_same_log(tmp_path):
    # the test is of the log, not of timing: a loaded machine (the twin pass
    # beside other work) may take longer than the group's 1.5 s ack wait to
    # push the first of 500 entries through the followers' compare
    g = await Group(tmp_path, enable_batch_push=True, max_wait_ack_time_ms=10000).start()
    try:
        leader = await g.leader()
        await asyncio.gather(*(leader.append(bytes([i % 251]) * 300) for i in range(500)))
        await g.converged()
    finally:
        await g.close()


def _outcome(code):
    """What a put's quorum wait resolves to: "ok" or DLedger's code."""
    return "ok" if code is None else code


async def test_puts_between_two_pushes_share_one_quorum_wait(tmp_path):
    """Batched pushes: appends made before the next push wait on one future,
    settled when the quorum reaches the last; one made after a push gets its own."""
    g = await Group(tmp_path, enable_batch_push=True).start()
    try:
        leader = await g.leader()
        store, pusher = leader.store, leader.pusher
        futures = []
        for i in range(5):
            first = store.ledger_end_index + 1
            futures.append(pusher.wait_quorum(store.append_as_leader(b"p%d" % i), first, _outcome))
        assert all(f is futures[0] for f in futures)
        assert await asyncio.wait_for(futures[0], 5) == "ok"
        assert store.committed_index >= 4
        first = store.ledger_end_index + 1
        later = pusher.wait_quorum(store.append_as_leader(b"later"), first, _outcome)
        assert later is not futures[0]
        assert await asyncio.wait_for(later, 5) == "ok"
        await g.converged()
    finally:
        await g.close()


async def test_a_cut_off_leader_fails_its_batched_puts_and_loses_their_tail(tmp_path):
    """A leader alone fails the group wait of its batched puts; once healed, the
    new leader's batches truncate its uncommitted tail away."""
    g = await Group(tmp_path, enable_batch_push=True).start()
    try:
        old = await g.leader()
        await asyncio.gather(*(old.append(b"before %d" % i) for i in range(40)))
        await g.converged()
        cut_id = old.member_state.self_id
        g.isolate(cut_id)
        store = old.store
        first = store.ledger_end_index + 1
        waits = [old.pusher.wait_quorum(store.append_as_leader(b"lost %d" % i), first, _outcome)
                 for i in range(30)]
        assert len({id(f) for f in waits}) == 1
        assert await asyncio.wait_for(waits[0], 10) in (Code.WAIT_QUORUM_ACK_TIMEOUT,
                                                         Code.TERM_CHANGED)
        assert not old.pusher.waiters
        new = await g.leader([n for n in IDS if n != cut_id])
        await asyncio.gather(*(new.append(b"after %d" % i) for i in range(60)))
        g.isolate(cut_id, cut=False)
        await g.converged()
        bodies = [body for _, body, _ in g.log(cut_id)]
        assert bodies == [b"before %d" % i for i in range(40)] + [b"after %d" % i for i in range(60)]
    finally:
        await g.close()
