# cython: language_level=3
# A send-lane read's runs walked (lane_runs.pyx), cimported by the compiled
# send lane (send_lane.pyx), which calls them without a Python call: the
# store's counts per topic, and the broker's listener when it is
# ``on_counted_runs`` bound to a controller (``functools.partial``).

cdef long long c_put_counts(stats, list runs) except -1
cdef int counted_walk(stats, list forms, list runs) except -1
cdef bint forms_want(list forms, topic) except -1
