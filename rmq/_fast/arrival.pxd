# cython: language_level=3
# The store's arrival notice of one single put (arrival.pyx), cimported by the
# single put (store_put.pyx), which calls it without a Python call when the
# store's listener is the controller's compiled ``on_message_arriving``.

cdef int arrive(object stats, list forms, tuple key, Py_hash_t key_hash, object next_offset,
                object tags_code, object store_ts, object nums, object size,
                object events) except -1
