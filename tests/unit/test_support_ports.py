"""The test suite's port picker: ranges drawn one after another never overlap,
even before anything binds them (a master and a slave broker drawn together)."""

from __future__ import annotations

import socket

from rmq.testing.procs import free_port


def test_ranges_drawn_together_are_disjoint_and_free():
    bases = [free_port(span=4) for _ in range(40)]
    ranges = sorted((range(b, b + 4) for b in bases), key=lambda r: r.start)
    for a, b in zip(ranges, ranges[1:], strict=False):
        assert a.stop <= b.start, (a, b)
    for port in ranges[0]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
