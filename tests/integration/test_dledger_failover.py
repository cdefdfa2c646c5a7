"""Three DLedger node processes (``python -m rmq.dledger.startup``) and a
client appending through the leader: SIGKILL the leader under load; a new
leader takes over within seconds, every acknowledged append is in the new
leader's log exactly once, and the killed node, restarted, catches up with an
identical log.  A peer list that does not name the node is one line and exit 1."""

from __future__ import annotations

import time

import pytest

from rmq.dledger.protocol import DLedgerError
from rmq.testing.dledger import ProcGroup
from rmq.testing.procs import run_cli

pytestmark = [pytest.mark.timeout(180)]


async def test_leader_killed_under_load(tmp_path):
    group = await ProcGroup(tmp_path).start()
    try:
        first = await group.leader()
        acked: list[bytes] = []
        failover_s = killed_at = None
        for n in range(400):
            body = f"append {n}".encode()
            if n == 150:
                group.kill(first)
                killed_at = time.monotonic()
            try:
                await group.client.append(body, retry_s=15)
            except DLedgerError:
                continue  # not acknowledged: may or may not be in the log, never retried
            acked.append(body)
            if killed_at is not None and failover_s is None:
                failover_s = time.monotonic() - killed_at
        survivors = [i for i in group.ids if i != first]
        new = await group.leader(survivors)
        assert new != first and failover_s is not None and failover_s < 10, failover_s
        log = await group.read_log(new)
        assert len(acked) >= 390
        assert all(log.count(body) == 1 for body in acked)  # none lost, none twice
        assert len(set(log)) == len(log)
        group.start_node(first)
        assert await group.converged(30) == log
        print(f"failover after SIGKILL of the leader: {failover_s:.2f} s")
    finally:
        await group.close()


def test_a_peer_list_without_this_node_is_refused(tmp_path):
    out = run_cli("rmq.dledger.startup",
                  ["--id", "n3", "--peers", "n0-127.0.0.1:1;n1-127.0.0.1:2",
                   "--store-base-dir", str(tmp_path)])
    assert out.returncode == 1
    assert out.stderr.strip() == \
        "dledger: dLegerSelfId n3 is not in dLegerPeers n0-127.0.0.1:1;n1-127.0.0.1:2"
    out = run_cli("rmq.dledger.startup",
                  ["--id", "n0", "--peers", "n0-127.0.0.1:1;n0-127.0.0.1:2",
                   "--store-base-dir", str(tmp_path)])
    assert out.returncode == 1 and "listed twice" in out.stderr
    assert not (tmp_path / "dledger-n3").exists()
