"""A started messaging cluster as an async context manager, for the module-scoped
fixtures of the client integration tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from rmq.testing.cluster import Cluster


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
