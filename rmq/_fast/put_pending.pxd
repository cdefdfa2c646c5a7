# cython: language_level=3
# BrokerStats.add_pending_put's common case in C, for the compiled listeners
# that count puts (rmq._fast.arrival, rmq._fast.lane_runs): one copy of the
# pending row's layout on this side.

from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject


cdef inline bint add_pending(dict pending_of, object key, object nums, object size,
                             object events) except -1:
    """``BrokerStats.add_pending_put`` of a queue already counted since the
    last fold (``pending_of``: its ``_put_pending``, rows [messages, puts,
    bytes]): True once added; False with nothing done for a new key or a row
    that keeps the size histogram, which the caller's ``inc_put`` counts."""
    cdef PyObject *found = PyDict_GetItem(pending_of, key)
    return add_to_row(None if found == NULL else <object>found, nums, size, events)


cdef inline bint add_to_row(object row, object nums, object size, object events) except -1:
    """``add_pending``'s sums into the queue's ``row`` (None: a new key, False)."""
    cdef list r
    if row is None or len(<list>row) > 3:
        return False
    r = <list>row
    r[0] += nums
    r[1] += events
    r[2] += size
    return True
