"""DLedger soak (``make soak``): a three-node group of real processes under a
bounded append load takes ``RMQ_DLEDGER_SOAK_ROUNDS`` (default 50) random
faults -- SIGKILL of the leader with a restart, the leader cut off from both
peers, a follower cut off -- each healed before the next.  At the end every
node holds the same log, every acknowledged append is in it exactly once, and
no append is in it twice.  Prints the failover times (fault to the first
acknowledged append after it): median and p99 go in bench/RESULTS.md."""

from __future__ import annotations

import asyncio
import bisect
import os
import random
import statistics
import time

import pytest

from rmq.dledger.protocol import DLedgerError
from rmq.testing.dledger import ProcGroup

pytestmark = [pytest.mark.soak, pytest.mark.timeout(1800)]

ROUNDS = int(os.environ.get("RMQ_DLEDGER_SOAK_ROUNDS", "50"))
APPENDERS = 4


async def test_random_leader_kills_and_partitions(tmp_path):
    rng = random.Random(int(os.environ.get("RMQ_DLEDGER_SOAK_SEED", "1")))
    group = await ProcGroup(tmp_path).start()
    acked: list[bytes] = []
    ack_times: list[float] = []  # monotonic, in order
    stop = asyncio.Event()

    async def appender(n: int) -> None:
        seq = 0
        while not stop.is_set():
            body = f"w{n}-{seq}".encode() + b"." * 200
            seq += 1
            try:
                await group.client.append(body, retry_s=5)
            except DLedgerError:
                await asyncio.sleep(0.05)  # unknown outcome: never retried
                continue
            acked.append(body)
            ack_times.append(time.monotonic())

    failovers: list[float] = []
    kinds: dict[str, int] = {}
    try:
        await group.leader()
        tasks = [asyncio.ensure_future(appender(n)) for n in range(APPENDERS)]
        for _ in range(ROUNDS):
            leader = await group.leader(timeout=30)
            kind = rng.choice(("kill-leader", "cut-leader", "cut-follower"))
            kinds[kind] = kinds.get(kind, 0) + 1
            victim = leader if kind != "cut-follower" else \
                rng.choice([i for i in group.ids if i != leader])
            fault_at = time.monotonic()
            if kind == "kill-leader":
                group.kill(victim)
            else:
                group.isolate(victim)
            await asyncio.sleep(rng.uniform(1.0, 3.0))
            while ack_times[-1] < fault_at and time.monotonic() - fault_at < 20:
                await asyncio.sleep(0.02)
            if kind != "cut-follower":
                first = bisect.bisect_right(ack_times, fault_at)
                assert first < len(ack_times), f"round {kind}: no append taken after the fault"
                failovers.append(ack_times[first] - fault_at)
            if kind == "kill-leader":
                group.start_node(victim)
            else:
                group.isolate(victim, cut=False)
            await asyncio.sleep(rng.uniform(0.5, 1.5))
        stop.set()
        await asyncio.gather(*tasks)
        log = await group.converged(120)
        counts: dict[bytes, int] = {}
        for body in log:
            counts[body] = counts.get(body, 0) + 1
        assert not [b for b, c in counts.items() if c > 1], "an append is in the log twice"
        missing = [b for b in acked if b not in counts]
        assert not missing, f"{len(missing)} acknowledged appends lost"
        failovers.sort()
        p99 = failovers[min(len(failovers) - 1, int(len(failovers) * 0.99))]
        print(f"\nDLedger soak: {ROUNDS} rounds {kinds}, {len(acked)} appends acknowledged, "
              f"log {len(log)} entries; failover median {statistics.median(failovers):.2f} s, "
              f"p99 {p99:.2f} s, max {failovers[-1]:.2f} s")
    finally:
        stop.set()
        await group.close()
