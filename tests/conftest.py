"""Shared pytest fixtures (free ports, real rmq processes that always stop) and
the rule that decides which tests the twin pass reruns.

``make test`` runs the suite twice: with the compiled extensions, then with
their pure-Python twins (RMQ_NO_EXTENSIONS=1).  The second pass is there for
code that has a compiled/twin pair, so it selects ``-m "not once"``: a test
marked ``once`` runs in the compiled pass only.  A test is ``once`` when its
subject is something built on top of rmq's runtime rather than the runtime
itself -- the Spark data source and jobs (tests/spark), the outside clients
(tests/interop, and the official 5.x gRPC clients of the test_rmq5_* files
that run one), the admin command line, the dashboard, the benchmarks and
load generators, the metrics exporter, the packaged units: whatever twin such
a test reaches, the broker, store, client and remoting tests already run in
both builds.  Directories are marked here, single files with ``pytestmark``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rmq.testing.cluster import Cluster
from rmq.testing.procs import RmqProcess, free_port

ONCE_DIRS = ("spark", "interop")  # under tests/: every test there is ``once``
_TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items) -> None:
    once_roots = [_TESTS / d for d in ONCE_DIRS]
    for item in items:
        if any(root in Path(item.fspath).parents for root in once_roots):
            item.add_marker(pytest.mark.once)


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def procs(tmp_path):
    """Factory for RmqProcess objects; every one is killed at teardown."""
    started: list[RmqProcess] = []

    def make(module: str, args: list[str], name: str = "proc", env: dict | None = None) -> RmqProcess:
        p = RmqProcess(module, args, tmp_path / "logs" / f"{name}-{len(started)}.out", env=env)
        started.append(p)
        return p

    yield make
    for p in started:
        p.kill()


@pytest.fixture
async def cluster(tmp_path):
    """A name server and a broker on the default broker.conf for one test; both
    stop at teardown.  A module that needs another configuration or a module
    scope defines its own ``cluster``, which takes precedence over this one."""
    c = Cluster(tmp_path)
    try:
        c.start_broker()
        yield c
    finally:
        await c.close()
