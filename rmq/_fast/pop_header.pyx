# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twin of ``_pop_header`` in rmq/broker/processor/pop.py: a
POP_MESSAGE's extFields read to the values ``read_pop`` checks, or the remark
of the SYSTEM_ERROR answer a missing or unreadable field gets.

Decimal texts (an optional '-' and up to 18 digits) and the usual "true" /
"false" are read here; any other text is handed to ``int()`` / ``str.lower``
as the twin does, so both take and refuse the same headers with the same
remarks (tests/unit/test_pop_header.py mutates headers to compare them).
"""

from libc.stdint cimport int64_t, uint8_t

cdef extern from "Python.h":
    bint PyUnicode_IS_COMPACT_ASCII(object o)
    void *PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)


cdef tuple INT_FIELDS = ("queueId", "maxMsgNums", "invisibleTime", "pollTime", "bornTime",
                         "initMode")


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


cdef inline object field_int(dict ext, str name, bint required):
    """``ext_int`` of the twin: the field's int, 0 for a missing optional
    one, or the remark (a str) of a missing or unreadable one."""
    cdef int64_t v
    value = ext.get(name)
    if value is None:
        return f"the custom field {name} is null" if required else 0
    if plain_int(value, &v):
        return v
    try:
        return int(value)
    except ValueError:
        return f"the custom field {name} is not a number: {value}"


cdef inline bint field_true(dict ext):
    """``ext_bool(ext, "order")`` of the twin."""
    cdef const uint8_t *p
    value = ext.get("order", "false")
    if type(value) is str and PyUnicode_IS_COMPACT_ASCII(value):
        if PyUnicode_GET_LENGTH(value) != 4:
            return False
        p = <const uint8_t *>PyUnicode_DATA(value)
        return ((p[0] | 32) == 116 and (p[1] | 32) == 114 and (p[2] | 32) == 117
                and (p[3] | 32) == 101)
    return str(value).lower() == "true"


def pop_header(dict ext):
    """``(group, topic, queueId, maxMsgNums, invisibleTime, pollTime,
    bornTime, initMode, order, expType, exp)`` of a POP_MESSAGE's extFields,
    or the remark of the SYSTEM_ERROR answer to a missing or unreadable one
    (the first in that order, as the twin)."""
    cdef list ints = []
    cdef int i
    group = ext.get("consumerGroup")
    if not group:
        return "the custom field consumerGroup is null"
    topic = ext.get("topic")
    if not topic:
        return "the custom field topic is null"
    for i in range(6):  # the first three required, the others 0 when missing
        value = field_int(ext, <str>INT_FIELDS[i], i < 3)
        if type(value) is str:
            return value
        ints.append(value)
    return (group, topic, ints[0], ints[1], ints[2], ints[3], ints[4], ints[5],
            field_true(ext), ext.get("expType"), ext.get("exp"))
