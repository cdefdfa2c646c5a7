# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of ``PutCounters`` (rmq/store/stats.py): the counters
``StoreStatsService`` keeps of every put and get.

Every put path counts into them: the send lane once per topic a read
stored into, the single put (a pop's checkpoint and an ack's record) once
per record, the pull lane once per read.  As a Python method each count is
a frame and a dozen attribute reads and writes on a plain object, a few
thousand instructions; here the scalar counters are C fields and the
compiled callers reach ``count_puts`` and ``count_get`` without a Python
call.  Readers see the same attributes: the scalars as ints, the per-topic
tables as the same dicts, ``put_latency`` as a list (a copy: only the
counting methods change it).
"""

from cpython.dict cimport PyDict_GetItemWithError, PyDict_SetItem
from cpython.long cimport PyLong_AsLongLongAndOverflow
from libc.limits cimport LLONG_MAX, LLONG_MIN
from cpython.object cimport PyObject

# each latency bucket's upper limit in ms; rmq/store/stats.py checks at
# import that its _BUCKETS are these
BUCKET_LIMITS = (0, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000)
cdef long long _LIMITS[12]
_LIMITS[:] = BUCKET_LIMITS


cdef inline int _bucket(long long ms):
    cdef int i
    for i in range(12):
        if ms <= _LIMITS[i]:
            return i
    return 12


cdef inline int _add(dict table, object key, long long n) except -1:
    """``table[key] = table.get(key, 0) + n``: an int's sum taken in C when
    it stays within a long long (no int object made of ``n`` to add)."""
    cdef PyObject *found = PyDict_GetItemWithError(table, key)
    cdef long long v
    cdef int ovf = 0
    if found == NULL:
        PyDict_SetItem(table, key, n)
        return 0
    if type(<object>found) is int:
        v = PyLong_AsLongLongAndOverflow(<object>found, &ovf)
        if not ovf and not (n > 0 and v > LLONG_MAX - n) and not (n < 0 and v < LLONG_MIN - n):
            PyDict_SetItem(table, key, v + n)
            return 0
    PyDict_SetItem(table, key, <object>found + n)
    return 0


cdef class PutCounters:
    """The scalar counters and the per-topic tables of StoreStatsService."""

    def __cinit__(self):
        self.topic_put_nums = {}
        self.topic_put_size = {}

    @property
    def put_latency(self) -> list:
        """Puts per latency bucket (rmq/store/stats.py's ``_BUCKETS``)."""
        return [self.latency[i] for i in range(LATENCY_BUCKETS)]

    cdef int count_puts(self, object topic, long long count, long long size,
                        long long puts) except -1:
        self.put_message_times_total += count
        self.put_message_size_total += size
        _add(self.topic_put_nums, topic, count)
        _add(self.topic_put_size, topic, size)
        self.latency[0] += puts
        return 0

    cdef int count_get(self, long long found, long long elapsed_ms) except -1:
        if found:
            self.get_message_times_total_found += 1
            self.get_message_transfered_msg_count += found
        else:
            self.get_message_times_total_miss += 1
        if elapsed_ms > self.get_message_entire_time_max:
            self.get_message_entire_time_max = elapsed_ms
        return 0

    def on_put(self, topic, long long count, long long size, long long elapsed_ms):
        self.count_puts(topic, count, size, 0)
        self.latency[_bucket(elapsed_ms)] += 1
        if elapsed_ms > self.put_message_entire_time_max:
            self.put_message_entire_time_max = elapsed_ms

    def on_put_one(self, topic, long long size):
        self.count_puts(topic, 1, size, 1)

    def on_puts(self, topic, long long count, long long size, long long puts):
        self.count_puts(topic, count, size, puts)

    def on_put_failed(self):
        self.put_message_failed_times += 1

    def on_get(self, long long found, long long elapsed_ms):
        self.count_get(found, elapsed_ms)


cdef object _plain_type = None  # the last class found counting as PutCounters does
_COUNTING = ("on_put", "on_put_one", "on_puts", "on_get")


cdef PutCounters counters_of(object stats):
    """``stats`` when the compiled callers may count into its fields
    directly: compiled counters whose class overrides none of the counting
    methods (a subclass that does hears of every count through its
    method); else None."""
    global _plain_type
    t = type(stats)
    if t is _plain_type:
        return <PutCounters>stats
    if not isinstance(stats, PutCounters):
        return None
    for name in _COUNTING:
        if getattr(t, name) is not getattr(PutCounters, name):
            return None
    _plain_type = t
    return <PutCounters>stats
