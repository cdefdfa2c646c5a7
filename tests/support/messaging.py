"""A started messaging cluster as an async context manager, for the module-scoped
fixtures of the client integration tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from tests.integration.test_messaging_support import MessagingCluster


@asynccontextmanager
async def running_cluster(tmp_path: Path, extra: str = "") -> AsyncIterator[MessagingCluster]:
    """rmq-namesrv + rmq-broker (``extra`` lines go into broker.conf), routable
    on entry; both processes are stopped on exit, also when start-up failed."""
    c = MessagingCluster(tmp_path, extra)
    try:
        c.start_broker()
        await c.wait_routable()
        yield c
    finally:
        await c.close()
