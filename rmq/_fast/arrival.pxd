# cython: language_level=3
# The store's arrival notice of one single put (arrival.pyx), cimported by the
# single put (store_put.pyx), which calls it without a Python call when the
# store's listener is the controller's compiled ``on_message_arriving``.

cdef int arrive(object stats, list forms, tuple key, Py_hash_t key_hash, object next_offset,
                object tags_code, object store_ts, object nums, object size,
                object events) except -1

# ``getattr(holder, name)`` of the listener form at place ``i`` of a
# controller's forms, at its slot when the holder's class slots it; shared
# with the send lane's runs walk (lane_runs.pyx), which meets the same forms.
cdef object waiting(object holder, str name, Py_ssize_t i)
