"""A DLedger group of real node processes whose links run through TCP proxies
in the test process: node i reaches node j through ``links[(i, j)]``, so a
test can SIGKILL a node (a crash) or cut its links (a partition).  Clients
talk to the nodes' own ports, which partitions leave alone."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from rmq.dledger.client import DLedgerClient
from rmq.dledger.protocol import DLedgerError
from rmq.remoting.exceptions import RemotingError
from rmq.testing.procs import RmqProcess, free_port
from rmq.testing.tcp_proxy import TcpProxy

TIMING = ["--heartbeat-ms", "300", "--min-vote-ms", "150", "--max-vote-ms", "450",
          "--data-file-size", str(4 * 1024 * 1024), "--index-file-size", str(32 * 65536)]


class ProcGroup:
    def __init__(self, tmp: Path, ids=("n0", "n1", "n2"), extra: list[str] | None = None) -> None:
        self.tmp = tmp
        self.ids = tuple(ids)
        self.extra = list(extra or [])
        self.ports = {i: free_port() for i in self.ids}
        self.links: dict[tuple[str, str], TcpProxy] = {}
        self.procs: dict[str, RmqProcess] = {}
        self.direct = ";".join(f"{i}-127.0.0.1:{self.ports[i]}" for i in self.ids)
        self.client = DLedgerClient("g", self.direct, timeout_ms=2000)

    async def start(self) -> ProcGroup:
        for a in self.ids:
            for b in self.ids:
                if a != b:
                    self.links[(a, b)] = await TcpProxy(self.ports[b]).start()
        for node in self.ids:
            self.start_node(node)
        return self

    def peers_of(self, node: str) -> str:
        return ";".join(f"{p}-127.0.0.1:"
                        f"{self.ports[p] if p == node else self.links[(node, p)].port}"
                        for p in self.ids)

    def start_node(self, node: str) -> None:
        proc = RmqProcess("rmq.dledger.startup",
                          ["--group", "g", "--id", node, "--peers", self.peers_of(node),
                           "--store-base-dir", str(self.tmp / "store"), *TIMING, *self.extra],
                          self.tmp / f"{node}.out")
        self.procs[node] = proc.start(wait_for_port=self.ports[node])

    def kill(self, node: str) -> None:
        self.procs[node].kill()

    def isolate(self, node: str, cut: bool = True) -> None:
        for (a, b), link in self.links.items():
            if node in (a, b):
                link.cut() if cut else link.heal()

    async def close(self) -> None:
        await self.client.close()
        for p in self.procs.values():
            p.kill()
        for link in self.links.values():
            await link.close()

    async def leader(self, among=None, timeout: float = 15.0) -> str:
        """The leader every reachable node of ``among`` names."""
        among = among or self.ids
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            seen = set()
            for peer in among:
                try:
                    meta = await self.client.metadata(peer)
                except (DLedgerError, RemotingError, OSError, TimeoutError):
                    continue
                seen.add(meta.leader_id)
            seen.discard(None)
            if len(seen) == 1 and seen <= set(among):
                return seen.pop()
            await asyncio.sleep(0.1)
        raise AssertionError(f"no agreed leader among {among}")

    async def read_log(self, peer: str) -> list[bytes]:
        bodies, index = [], 0
        while (entry := await self.client.get(peer, index)) is not None:
            bodies.append(entry.body)
            index += 1
        return bodies

    async def converged(self, timeout: float = 60.0) -> list[bytes]:
        """Wait until every node holds the same log; that log."""
        deadline = time.monotonic() + timeout
        while True:
            logs = [await self.read_log(n) for n in self.ids]
            if all(log == logs[0] for log in logs):
                return logs[0]
            if time.monotonic() > deadline:
                raise AssertionError({n: len(log) for n, log in zip(self.ids, logs, strict=True)})
            await asyncio.sleep(0.3)
