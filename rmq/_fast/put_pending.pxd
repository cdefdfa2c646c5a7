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
    cdef list row
    if found == NULL or len(<list>found) > 3:
        return False
    row = <list>found
    row[0] += nums
    row[1] += events
    row[2] += size
    return True
