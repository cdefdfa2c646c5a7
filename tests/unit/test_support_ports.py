"""The test suite's port picker: ranges drawn one after another never overlap,
even before anything binds them (a master and a slave broker drawn together)."""

from __future__ import annotations

import socket

from rmq.testing import procs
from rmq.testing.procs import free_port


def test_ranges_drawn_together_are_disjoint_and_free():
    bases = [free_port(span=4) for _ in range(40)]
    ranges = sorted((range(b, b + 4) for b in bases), key=lambda r: r.start)
    for a, b in zip(ranges, ranges[1:], strict=False):
        assert a.stop <= b.start, (a, b)
    for port in ranges[0]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))



def test_a_kept_port_stays_out_of_every_later_draw():
    """A module-level port (drawn at import, bound when the module runs) is
    never offered again, however many draws come between (the memory of
    recent draws turns over after 64)."""
    kept = free_port(keep=True)
    for _ in range(100):
        free_port()
    # free on the machine, yet no range that holds it can be drawn
    assert not procs._all_free(kept - 3, 4) and not procs._all_free(kept, 1)
