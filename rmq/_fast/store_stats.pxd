# cython: language_level=3
"""The store's put and get counters as C fields (twin: ``PutCounters`` in
rmq/store/stats.py), with C entries the compiled put paths call directly."""

cdef enum:
    LATENCY_BUCKETS = 13  # len(_BUCKETS) + 1 in rmq/store/stats.py


cdef class PutCounters:
    cdef public long long put_message_times_total
    cdef public long long put_message_size_total
    cdef public long long put_message_failed_times
    cdef public long long put_message_entire_time_max
    cdef public long long get_message_entire_time_max
    cdef public long long get_message_times_total_found
    cdef public long long get_message_times_total_miss
    cdef public long long get_message_transfered_msg_count
    cdef public long long dispatch_max_buffer
    cdef public dict topic_put_nums
    cdef public dict topic_put_size
    cdef long long latency[LATENCY_BUCKETS]

    cdef int count_puts(self, object topic, long long count, long long size,
                        long long puts) except -1
    cdef int count_get(self, long long found, long long elapsed_ms) except -1


cdef PutCounters counters_of(object stats)
