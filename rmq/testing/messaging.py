"""A started messaging cluster as an async context manager, for the module-scoped
fixtures of the client integration tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from rmq.testing.cluster import Cluster
from rmq.testing.procs import free_port, wait_port


@asynccontextmanager
async def running_cluster(tmp_path: Path, extra: str = "") -> AsyncIterator[Cluster]:
    """rmq-namesrv + rmq-broker (``extra`` lines go into broker.conf), routable
    on entry; both processes are stopped on exit, also when start-up failed."""
    c = Cluster(tmp_path, extra)
    try:
        c.start_broker()
        await c.wait_routable()
        yield c
    finally:
        await c.close()


@asynccontextmanager
async def grpc_cluster(tmp_path: Path, extra: str = "", topic: str | None = None,
                       queues: int = 4) -> AsyncIterator[Cluster]:
    """rmq-namesrv + rmq-broker with its gRPC endpoint on a free port
    (``c.grpc_port``), registered with the name server and, when ``topic`` is
    given, that topic created with ``queues`` queues and routable; both
    processes are stopped on exit, also when start-up failed."""
    grpc_port = free_port()
    c = Cluster(tmp_path, f"grpcServerPort={grpc_port}\n{extra}")
    c.grpc_port = grpc_port
    try:
        c.start_broker()
        wait_port(grpc_port, timeout=20)
        await c.wait_registered()
        if topic is not None:
            await c.create_topic(topic, queues)
        yield c
    finally:
        await c.close()
