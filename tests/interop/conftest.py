"""Fixtures of the interop suite: a real rmq cluster and the C++ client runner."""

from __future__ import annotations

import pytest

from tests.interop.harness import Cluster, CppRunner


@pytest.fixture
def cluster_factory(tmp_path):
    """Build clusters (auto-create on or off); every process is killed at teardown.

    On failure the tail of every rmq process output is printed with the report.
    """
    made: list[Cluster] = []

    def make(auto_create: bool = True, extra: str = "") -> Cluster:
        c = Cluster(tmp_path / f"cluster{len(made)}", auto_create=auto_create, extra=extra)
        c.tmp.mkdir(parents=True)
        made.append(c)
        return c.start()

    yield make
    for c in made:
        c.stop()
        print(c.outputs())


@pytest.fixture
def cluster(cluster_factory) -> Cluster:
    return cluster_factory()


@pytest.fixture
def cpp(tmp_path, cluster):
    runner = CppRunner(tmp_path, cluster)
    yield runner
    runner.close()
