# cython: language_level=3
"""Compiled twin of ``Lanes`` in rmq/broker/lanes.py (same constructor,
``lanes``, ``serve`` and ``served``): the server's lanes offered a read in
turn from C, so a read between the protocol's ``buffer_updated`` and the
lane that takes it costs no Python frame of its own; the taking lane's
answer is handed back as it came (no new tuple)."""


cdef class Lanes:
    """Lanes tried in order (``FrameLane`` itself)."""
    cdef readonly tuple lanes
    cdef object _last

    def __init__(self, *lanes):
        self.lanes = lanes
        self._last = lanes[0]

    def serve(self, channel, buf, pos, end):
        """The first lane's answer that took anything: (position, answers)."""
        for lane in self.lanes:
            got = lane.serve(channel, buf, pos, end)
            taken, out = got
            if taken != pos or out is not None:
                self._last = lane
                return got
        return pos, None

    def served(self):
        """What the lane that took the last run served."""
        return self._last.served()
