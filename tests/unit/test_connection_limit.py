"""ConnectionLimiter: counting, refusals and the rate-limited log line."""

from __future__ import annotations

import logging

import pytest

from rmq.remoting.connection_limit import ConnectionLimiter, remote_host

pytestmark = pytest.mark.timeout(10)


def test_off_by_default_admits_everything():
    lim = ConnectionLimiter()
    assert not lim.enabled
    assert all(lim.admit("10.0.0.1") is None for _ in range(1000))


def test_total_and_per_address_bounds():
    lim = ConnectionLimiter(max_total=3, max_per_address=2)
    assert lim.admit("a") is None and lim.admit("a") is None
    assert "serverMaxConnectionsPerAddress=2" in lim.admit("a")
    assert lim.admit("b") is None
    assert "serverMaxConnections=3" in lim.admit("c")
    assert lim.total == 3 and lim.per_host == {"a": 2, "b": 1}
    lim.release("a")
    assert lim.admit("c") is None
    for host in ("a", "b", "c"):
        lim.release(host)
    assert lim.total == 0 and lim.per_host == {}


def test_refusals_log_one_line_per_second(caplog):
    lim = ConnectionLimiter(max_total=1)
    with caplog.at_level(logging.WARNING, "rmq.remoting"):
        for _ in range(50):
            lim.log_refusal("broker", "127.0.0.1:5", "full")
    assert lim.refused == 50
    assert len(caplog.records) == 1


@pytest.mark.parametrize("addr,host", [("127.0.0.1:10911", "127.0.0.1"),
                                       ("::1:4321", "::1"), ("noport", "noport")])
def test_remote_host(addr, host):
    assert remote_host(addr) == host
