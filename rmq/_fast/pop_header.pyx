# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twin of ``_pop_header`` in rmq/broker/processor/pop.py: a
POP_MESSAGE's extFields read to the values ``read_pop`` checks, or the remark
of the SYSTEM_ERROR answer a missing or unreadable field gets.

Decimal texts (an optional '-' and up to 18 digits) and the usual "true" /
"false" are read here; any other text is handed to ``int()`` / ``str.lower``
as the twin does, so both take and refuse the same headers with the same
remarks (tests/unit/test_pop_header.py mutates headers to compare them).
"""

from cpython.dict cimport PyDict_Next
from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF, Py_XINCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from libc.stdint cimport int64_t, uint8_t
from libc.string cimport memcmp

cdef extern from "Python.h":
    bint PyUnicode_IS_COMPACT_ASCII(object o)
    void *PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    PyObject *PyDict_GetItemWithError(object d, object key) except? NULL


# the fields read, in the order the twin reads (and refuses) them: the
# first two texts, six ints (the first three required, the others 0 when
# missing), the order flag, the filter's type and expression
cdef tuple NAMES = ("consumerGroup", "topic", "queueId", "maxMsgNums", "invisibleTime",
                    "pollTime", "bornTime", "initMode", "order", "expType", "exp")
cdef enum:
    F_GROUP, F_TOPIC, F_INTS, F_ORDER = 8, F_EXP_TYPE, F_EXP, F_COUNT
# their lengths and characters (ASCII: the tuple keeps them)
cdef Py_ssize_t _NAME_LEN[F_COUNT]
cdef const void *_NAME_DATA[F_COUNT]


cdef int name_bytes() except -1:
    """``_NAME_LEN`` and ``_NAME_DATA`` of ``NAMES``, each of which
    ``field_of`` finds."""
    cdef Py_ssize_t i
    for i in range(F_COUNT):
        name = <str>NAMES[i]
        if not PyUnicode_IS_COMPACT_ASCII(name):
            raise ValueError(f"{name!r} is not ASCII")
        _NAME_LEN[i] = PyUnicode_GET_LENGTH(name)
        _NAME_DATA[i] = PyUnicode_DATA(name)
    for i in range(F_COUNT):
        if field_of(<const char *>_NAME_DATA[i], _NAME_LEN[i]) != i:
            raise ValueError(f"field_of does not find {NAMES[i]!r}")
    return 0


cdef inline int field_of(const char *data, Py_ssize_t n) noexcept nogil:
    """The index in ``NAMES`` of the name ``data[:n]`` (ASCII), -1 for none:
    the one candidate its length and first letter leave, compared whole."""
    cdef int i = -1
    if n == 3:
        i = F_EXP
    elif n == 5:
        i = F_TOPIC if data[0] == c't' else F_ORDER
    elif n == 7:
        i = F_INTS if data[0] == c'q' else F_EXP_TYPE  # queueId, expType
    elif n == 8:  # pollTime, bornTime, initMode
        i = F_INTS + 3 if data[0] == c'p' else F_INTS + 4 if data[0] == c'b' else F_INTS + 5
    elif n == 10:
        i = F_INTS + 1  # maxMsgNums
    elif n == 13:  # consumerGroup, invisibleTime
        i = F_GROUP if data[0] == c'c' else F_INTS + 2
    if i < 0 or memcmp(_NAME_DATA[i], data, n) != 0:
        return -1
    return i


name_bytes()


cdef inline bint plain_int(object value, int64_t *out):
    """A str of an optional '-' and 1-18 ASCII digits: its value."""
    cdef const uint8_t *p
    cdef Py_ssize_t n, i = 0
    cdef int64_t v = 0
    cdef bint neg = False
    if type(value) is not str or not PyUnicode_IS_COMPACT_ASCII(value):
        return False
    p = <const uint8_t *>PyUnicode_DATA(value)
    n = PyUnicode_GET_LENGTH(value)
    if n and p[0] == 45:
        neg = True
        i = 1
    if n - i < 1 or n - i > 18:
        return False
    while i < n:
        if not 48 <= p[i] <= 57:
            return False
        v = v * 10 + (p[i] - 48)
        i += 1
    out[0] = -v if neg else v
    return True


cdef inline object field_int(object value, str name, bint required):
    """``ext_int`` of the twin of the field's ``value`` (None: missing): its
    int, 0 for a missing optional one, or the remark (a str) of a missing or
    unreadable one."""
    cdef int64_t v
    if value is None:
        return f"the custom field {name} is null" if required else 0
    if plain_int(value, &v):
        return v
    try:
        return int(value)
    except ValueError:
        return f"the custom field {name} is not a number: {value}"


cdef inline bint field_true(PyObject *found):
    """``ext_bool(ext, "order")`` of the twin, of the field's value
    (``found``; NULL: missing)."""
    cdef const uint8_t *p
    if found == NULL:
        return False  # ("false")
    value = <object>found
    if type(value) is str and PyUnicode_IS_COMPACT_ASCII(value):
        if PyUnicode_GET_LENGTH(value) != 4:
            return False
        p = <const uint8_t *>PyUnicode_DATA(value)
        return ((p[0] | 32) == 116 and (p[1] | 32) == 114 and (p[2] | 32) == 117
                and (p[3] | 32) == 101)
    return str(value).lower() == "true"


cdef int find_fields(dict ext, PyObject **found) except -1:
    """The values of the fields ``NAMES`` in ``ext`` into ``found`` (all
    NULL: missing ones stay so), each referenced: one walk of its items, a
    key matched by its length, first letter and bytes (``field_of``) -- each
    a dict lookup where a key is not an exact str (a str subclass may equal
    a name)."""
    cdef Py_ssize_t pos = 0, i
    cdef PyObject *key
    cdef PyObject *value
    while PyDict_Next(ext, &pos, &key, &value):
        if type(<object>key) is not str:
            for i in range(F_COUNT):
                found[i] = NULL
            for i in range(F_COUNT):
                found[i] = PyDict_GetItemWithError(ext, <str>NAMES[i])
                Py_XINCREF(found[i])
            return 0
        if not PyUnicode_IS_COMPACT_ASCII(<object>key):
            continue  # (no name)
        i = field_of(<const char *>PyUnicode_DATA(<object>key), PyUnicode_GET_LENGTH(<object>key))
        if i >= 0:
            found[i] = value
    for i in range(F_COUNT):
        Py_XINCREF(found[i])
    return 0


cdef inline void put(object out, Py_ssize_t i, object value) noexcept:
    """Item ``i`` of the new tuple ``out`` set to ``value``."""
    Py_INCREF(value)
    PyTuple_SET_ITEM(out, i, value)


cdef inline object value_of(PyObject *found):
    """A field's value, None when missing (``ext.get``)."""
    return None if found == NULL else <object>found


def pop_header(dict ext):
    """``(group, topic, queueId, maxMsgNums, invisibleTime, pollTime,
    bornTime, initMode, order, expType, exp)`` of a POP_MESSAGE's extFields,
    or the remark of the SYSTEM_ERROR answer to a missing or unreadable one
    (the first in that order, as the twin)."""
    cdef PyObject *found[F_COUNT]
    cdef int i
    for i in range(F_COUNT):
        found[i] = NULL
    try:
        find_fields(ext, found)
        group = value_of(found[F_GROUP])
        if not group:
            return "the custom field consumerGroup is null"
        topic = value_of(found[F_TOPIC])
        if not topic:
            return "the custom field topic is null"
        out = PyTuple_New(F_COUNT)  # (filled in order: one refused leaves it unfinished)
        put(out, F_GROUP, group)
        put(out, F_TOPIC, topic)
        for i in range(F_INTS, F_ORDER):  # the first three required, the others 0 when missing
            v = field_int(value_of(found[i]), <str>NAMES[i], i < F_INTS + 3)
            if type(v) is str:
                return v
            put(out, i, v)
        put(out, F_ORDER, field_true(found[F_ORDER]))
        put(out, F_EXP_TYPE, value_of(found[F_EXP_TYPE]))
        put(out, F_EXP, value_of(found[F_EXP]))
        return out
    finally:
        for i in range(F_COUNT):
            Py_XDECREF(found[i])
