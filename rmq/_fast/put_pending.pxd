# cython: language_level=3
# BrokerStats.add_pending_put's common case in C, for the compiled listeners
# that count puts (rmq._fast.arrival, rmq._fast.lane_runs): one copy of the
# pending row's layout on this side.


cdef inline bint add_to_row(object row, object nums, object size, object events) except -1:
    """``BrokerStats.add_pending_put`` of a queue already counted since the
    last fold, given its pending ``row`` ([messages, puts, bytes]): True once
    added; False with nothing done for a new key (``row`` None) or a row that
    keeps the size histogram, which the caller's ``inc_put`` counts."""
    cdef list r
    if row is None or len(<list>row) > 3:
        return False
    r = <list>row
    r[0] += nums
    r[1] += events
    r[2] += size
    return True
