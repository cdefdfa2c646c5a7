"""Three DLedger node processes (``python -m rmq.store.dledger.startup``) and a
client appending through the leader: SIGKILL the leader under load; a new
leader takes over within seconds, every acknowledged append is in the new
leader's log exactly once, and the killed node, restarted, catches up with an
identical log.  A peer list that does not name the node is one line and exit 1."""

from __future__ import annotations

import asyncio
import time

import pytest

from rmq.remoting.exceptions import RemotingError
from rmq.store.dledger.client import DLedgerClient
from rmq.store.dledger.protocol import DLedgerError
from tests.support.procs import RmqProcess, free_port, run_cli

pytestmark = [pytest.mark.timeout(180)]

IDS = ("n0", "n1", "n2")
TIMING = ["--heartbeat-ms", "300", "--min-vote-ms", "150", "--max-vote-ms", "450",
          "--data-file-size", str(1024 * 1024), "--index-file-size", str(32 * 16384)]


def node(tmp_path, peers: str, node_id: str) -> RmqProcess:
    return RmqProcess("rmq.store.dledger.startup",
                      ["--group", "g", "--id", node_id, "--peers", peers,
                       "--store-base-dir", str(tmp_path / "store"), *TIMING],
                      tmp_path / f"{node_id}.out")


async def leader_of(client: DLedgerClient, among, timeout: float = 15.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = set()
        for peer in among:
            try:
                meta = await client.metadata(peer)
            except (DLedgerError, RemotingError, OSError, TimeoutError):
                continue
            seen.add(meta.get("leaderId"))
        seen.discard(None)
        if len(seen) == 1 and seen <= set(among):
            return seen.pop()
        await asyncio.sleep(0.1)
    raise AssertionError(f"no agreed leader among {among}")


async def read_log(client: DLedgerClient, peer: str) -> list[bytes]:
    bodies, index = [], 0
    while (entry := await client.get(peer, index)) is not None:
        bodies.append(entry.body)
        index += 1
    return bodies


async def test_leader_killed_under_load(tmp_path):
    ports = {i: free_port() for i in IDS}
    peers = ";".join(f"{i}-127.0.0.1:{ports[i]}" for i in IDS)
    procs = {i: node(tmp_path, peers, i).start(wait_for_port=ports[i]) for i in IDS}
    client = DLedgerClient("g", peers, timeout_ms=2000)
    try:
        first = await leader_of(client, IDS)
        acked: list[bytes] = []
        failover_s = None
        killed_at = None
        for n in range(400):
            body = f"append {n}".encode()
            if n == 150:
                procs[first].kill()
                killed_at = time.monotonic()
            try:
                await client.append(body, retry_s=15)
            except DLedgerError:
                continue  # not acknowledged: may or may not be in the log, never retried
            acked.append(body)
            if killed_at is not None and failover_s is None and n > 150:
                failover_s = time.monotonic() - killed_at
        survivors = [i for i in IDS if i != first]
        new = await leader_of(client, survivors)
        assert new != first and failover_s is not None and failover_s < 10, failover_s
        log = await read_log(client, new)
        assert len(acked) >= 390
        assert all(log.count(body) == 1 for body in acked)  # none lost, none twice
        assert len(set(log)) == len(log)
        procs[first] = node(tmp_path, peers, first).start(wait_for_port=ports[first])
        deadline = time.monotonic() + 30
        while True:
            if await read_log(client, first) == await read_log(client, new):
                break
            assert time.monotonic() < deadline, "the restarted node never caught up"
            await asyncio.sleep(0.3)
        print(f"failover after SIGKILL of the leader: {failover_s:.2f} s")
    finally:
        await client.close()
        for p in procs.values():
            p.kill()


def test_a_peer_list_without_this_node_is_refused(tmp_path):
    out = run_cli("rmq.store.dledger.startup",
                  ["--id", "n3", "--peers", "n0-127.0.0.1:1;n1-127.0.0.1:2",
                   "--store-base-dir", str(tmp_path)])
    assert out.returncode == 1
    assert out.stderr.strip() == \
        "dledger: dLegerSelfId n3 is not in dLegerPeers n0-127.0.0.1:1;n1-127.0.0.1:2"
    out = run_cli("rmq.store.dledger.startup",
                  ["--id", "n0", "--peers", "n0-127.0.0.1:1;n0-127.0.0.1:2",
                   "--store-base-dir", str(tmp_path)])
    assert out.returncode == 1 and "listed twice" in out.stderr
    assert not (tmp_path / "dledger-n3").exists()
