"""Shared pytest fixtures: free ports and real rmq processes that always stop."""

from __future__ import annotations

import pytest

from rmq.testing.procs import RmqProcess, free_port


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
