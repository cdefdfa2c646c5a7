# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twins of ``send_properties`` in rmq/store/message_codec.py and of
``_parse_single`` in rmq/broker/processor/send_support.py (the header fields
of the single-send fast path: plain ASCII numbers read with a C loop, anything
else left to the general header parser).

A SEND_MESSAGE(_V2) request's property string becomes, in one call, what the
broker stores (STORE_FORMAT.md 3.2): the property map plus CLUSTER, the
stored string in ``java.util.HashMap`` order without WAIT, and the tagsCode.
Same inputs, same outputs as the twin.

The common case (an ASCII string of at most MAX_SEGS segments, no key twice,
no CLUSTER sent, an ASCII cluster name) is scanned with a C loop and the
stored string is assembled by copying the request's own ``key\\x01value``
segments in HashMap order; anything else takes the general path.  The
HashMap order of a key sequence (as a permutation) and the code of a TAGS
value are cached: senders repeat both.
"""

from cpython.dict cimport PyDict_GetItem, PyDict_SetItem
from cpython.object cimport PyObject
from libc.string cimport memcpy

from rmq.common.message import tags_string_to_code

cdef extern from "Python.h":
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    void *PyUnicode_DATA(object o)
    int PyUnicode_IS_ASCII(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    object PyUnicode_FromStringAndSize(const char *u, Py_ssize_t size)

DEF MAX_SEGS = 64

cdef str _CLUSTER = "CLUSTER"
cdef str _WAIT = "WAIT"
cdef str _TAGS = "TAGS"
cdef dict _perm_cache = {}
cdef dict _tags_cache = {}
cdef object _hashmap_order = None


def bind(hashmap_order):
    """The twin module's key-order function (one rule for both builds)."""
    global _hashmap_order
    _hashmap_order = hashmap_order


cdef dict _parse(str text):
    """``string2messageProperties``: segments split on \\x02, used only with a
    \\x01 neither first nor last; later duplicates win."""
    cdef dict out = {}
    cdef str seg
    cdef Py_ssize_t idx, n
    for seg in text.split("\x02"):
        n = len(seg)
        idx = seg.find("\x01")
        if 0 < idx < n - 1:
            out[seg[:idx]] = seg[idx + 1:]
    return out


cdef long long _tags_code(object tags) except? -1:
    c = _tags_cache.get(tags)
    if c is None:
        c = tags_string_to_code(tags)
        if len(_tags_cache) >= 4096:
            _tags_cache.clear()
        _tags_cache[tags] = c
    return c


cdef tuple _perm(tuple keys):
    """Indices of ``keys`` in HashMap iteration order (cached per sequence)."""
    perm = _perm_cache.get(keys)
    if perm is None:
        order = _hashmap_order(keys)
        perm = tuple([keys.index(k) for k in order])
        if len(_perm_cache) >= 4096:
            _perm_cache.clear()
        _perm_cache[keys] = perm
    return <tuple>perm


cdef tuple _general(object text, object cluster):
    """Any input: the same steps as the twin."""
    cdef dict props
    if text is None or not text:
        props = {}
    elif type(text) is str:
        props = _parse(<str>text)
    else:
        props = _parse(bytes(text).decode("utf-8", "replace"))
    props[_CLUSTER] = cluster
    wait = props.pop(_WAIT, None)
    cdef tuple keys = tuple(props)
    cdef tuple perm = _perm(keys)
    cdef list parts = []
    for j in perm:
        k = keys[j]
        v = props[k]
        if v is not None:
            parts.append(k + "\x01" + v)
    stored = "\x02".join(parts)
    if wait is not None:
        props[_WAIT] = wait
    tags = props.get(_TAGS)
    return props, stored, _tags_code(tags) if tags else 0


def send_properties(text, cluster):
    """(properties with CLUSTER and WAIT as sent, stored string, tagsCode)."""
    if type(text) is not str or type(cluster) is not str or not PyUnicode_IS_ASCII(text) \
            or not PyUnicode_IS_ASCII(cluster):
        return _general(text, cluster)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    cdef const char *p = <const char *>PyUnicode_DATA(text)
    cdef Py_ssize_t starts[MAX_SEGS + 1]
    cdef Py_ssize_t lens[MAX_SEGS + 1]
    cdef Py_ssize_t count = 0, start = 0, i, idx, slen, j
    cdef Py_ssize_t wait_seg = -1
    cdef dict props = {}
    # scan: every valid segment's position, key and value into the map
    i = 0
    while i <= n:
        if i == n or p[i] == 2:
            slen = i - start
            idx = 0
            while idx < slen and p[start + idx] != 1:
                idx += 1
            if 0 < idx < slen - 1:
                if count == MAX_SEGS:
                    return _general(text, cluster)
                key = PyUnicode_FromStringAndSize(p + start, idx)
                if PyDict_GetItem(props, key) is not NULL or key == _CLUSTER:
                    return _general(text, cluster)  # a key twice, or CLUSTER sent
                PyDict_SetItem(props, key, PyUnicode_FromStringAndSize(p + start + idx + 1,
                                                                       slen - idx - 1))
                if key == _WAIT:
                    wait_seg = count
                starts[count] = start
                lens[count] = slen
                count += 1
            start = i + 1
        i += 1
    wait = props.pop(_WAIT, None)
    props[_CLUSTER] = cluster
    # segments in map order (WAIT left out), CLUSTER's last
    cdef Py_ssize_t m = 0
    for j in range(count):
        if j != wait_seg:
            starts[m] = starts[j]
            lens[m] = lens[j]
            m += 1
    cdef Py_ssize_t clen = PyUnicode_GET_LENGTH(cluster)
    cdef tuple perm = _perm(tuple(props))
    cdef Py_ssize_t total = m + 8 + clen  # m separators + "CLUSTER\x01" + value
    for j in range(m):
        total += lens[j]
    stored = PyUnicode_New(total, 127)
    cdef char *out = <char *>PyUnicode_DATA(stored)
    cdef const char *cp = <const char *>PyUnicode_DATA(cluster)
    cdef Py_ssize_t pos = 0
    cdef Py_ssize_t k, first = 1
    for k in perm:
        if not first:
            out[pos] = 2
            pos += 1
        first = 0
        if k == m:
            memcpy(out + pos, b"CLUSTER\x01", 8)
            memcpy(out + pos + 8, cp, clen)
            pos += 8 + clen
        else:
            memcpy(out + pos, p + starts[k], lens[k])
            pos += lens[k]
    if wait is not None:
        props[_WAIT] = wait
    tags = props.get(_TAGS)
    return props, stored, _tags_code(tags) if tags else 0


cdef inline bint _strict_int(object text, long long *out) noexcept:
    """An ASCII ``-?[0-9]{1,18}`` str into ``out``; False for anything else."""
    if type(text) is not str or not PyUnicode_IS_ASCII(text):
        return False
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    cdef const char *p = <const char *>PyUnicode_DATA(text)
    cdef Py_ssize_t i = 0
    cdef bint neg = False
    cdef long long v = 0
    if n > 0 and p[0] == 45:  # '-'
        neg = True
        i = 1
    if n - i < 1 or n - i > 18:
        return False
    while i < n:
        if p[i] < 48 or p[i] > 57:
            return False
        v = v * 10 + (p[i] - 48)
        i += 1
    out[0] = -v if neg else v
    return True


cdef inline bint _java_int(long long v) noexcept:
    return -2147483648 <= v <= 2147483647


def parse_single(ext, tuple keys):
    """Twin of ``_parse_single`` in rmq/broker/processor/send_support.py."""
    if type(ext) is not dict or len(keys) < 10:
        return None
    cdef dict d = <dict>ext
    topic = d.get(keys[1])
    if type(topic) is not str or d.get(keys[0]) is None or d.get(keys[2]) is None:
        return None
    cdef long long nums[5]
    cdef int i
    for i in range(5):
        if not _strict_int(d.get(keys[3 + i]), &nums[i]):
            return None
        if i != 3 and not _java_int(nums[i]):
            return None
    props = d.get(keys[8])
    if props is not None and type(props) is not str:
        return None
    rt = d.get(keys[9])
    cdef long long reconsume = 0
    if rt is not None and (not _strict_int(rt, &reconsume) or not _java_int(reconsume)):
        return None
    return topic, nums[1], nums[2], nums[3], nums[4], props, reconsume
