"""Several frame lanes on one server: each read is offered to them in turn.

A remoting server has one lane slot (``RemotingService.lane``); the broker
has a lane for plain sends and one for pulls.  ``Lanes`` offers the frames at
the start of a read to each lane in order and hands back the first one's
answer that took anything, so a producer's run of sends and a consumer's run
of pulls are each served by their own lane; a frame neither takes goes the
general way, as with a single lane.
"""

from __future__ import annotations

from typing import Any

from rmq._fast import compiled


class Lanes:
    """Lanes tried in order (``FrameLane`` itself); the pure-Python twin of
    ``rmq._fast.lanes.Lanes``, which a server gets when it is built."""

    __slots__ = ("lanes", "_last")

    def __init__(self, *lanes: Any) -> None:
        self.lanes = lanes
        self._last = lanes[0]

    def serve(self, channel: Any, buf, pos: int, end: int) -> tuple[int, bytes | None]:
        for lane in self.lanes:
            taken, out = lane.serve(channel, buf, pos, end)
            if taken != pos or out is not None:
                self._last = lane
                return taken, out
        return pos, None

    def served(self) -> list[tuple[int, bool, int]]:
        """What the lane that took the last run served."""
        return self._last.served()


def _lanes_class() -> type:
    """The compiled ``Lanes`` when built, else the twin."""
    c = compiled("lanes")
    return Lanes if c is None else c.Lanes


def join_lanes(*lanes: Any) -> Any:
    """One lane for a server from those that exist (None when none does);
    the lanes of a ``Lanes`` (either kind) given are taken one by one, in
    their order."""
    made = _lanes_class()
    present = []
    for lane in lanes:
        if isinstance(lane, (Lanes, made)):
            present.extend(lane.lanes)
        elif lane is not None:
            present.append(lane)
    if not present:
        return None
    return present[0] if len(present) == 1 else made(*present)
