# cython: language_level=3
# A plain dict read and set with a key whose hash the caller keeps (a tuple's
# is computed anew at every lookup: ~150 instructions for (topic, queue id)):
# CPython's _PyDict_GetItem_KnownHash and _PyDict_SetItem_KnownHash, exported
# (outside the limited API) by 3.11 and 3.12; later versions hash the key again.  Shared by the single
# put (store_put.pyx) and its arrival notice (arrival.pyx, put_pending.pxd).

from cpython.object cimport PyObject


cdef extern from *:
    """
    #if PY_VERSION_HEX < 0x030D0000
    #define rmq_dict_get_known(d, k, h) _PyDict_GetItem_KnownHash((d), (k), (h))
    #define rmq_dict_set_known(d, k, v, h) _PyDict_SetItem_KnownHash((d), (k), (v), (h))
    #else
    #define rmq_dict_get_known(d, k, h) PyDict_GetItemWithError((d), (k))
    #define rmq_dict_set_known(d, k, v, h) PyDict_SetItem((d), (k), (v))
    #endif
    """
    # ``d`` a dict, ``h`` hash(k); borrowed, NULL when missing (an error set: raised)
    PyObject *dict_get_known "rmq_dict_get_known" (object d, object k, Py_hash_t h) except? NULL
    int dict_set_known "rmq_dict_set_known" (object d, object k, object v, Py_hash_t h) except -1
