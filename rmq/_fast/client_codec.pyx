# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twins of ``rmq.client.codec.decode_messages`` (a whole pull body in
one call into the client's ``MessageExt`` objects) and of ``encode_batch``
(a SEND_BATCH_MESSAGE body in one exactly sized allocation).

Same arguments, same objects (field for field), same errors as the twin; the
record layout is at the top of rmq/client/codec.py.  Every record is checked
against the buffer before any field is read.  Why it is fast:

* the buffer is walked with raw pointers, no tuples or struct calls;
* strings that repeat within a body (topic, hosts, property names and short
  values such as TAGS, WAIT, CLUSTER) are made once per call and shared, so
  their hashes are computed once too;
* a record whose properties have an earlier record's keys in the same order
  (the records of a batch) gets a copy of that record's dict with the values
  that differ set again: no hashing or probing per key;
* numbers that repeat from one record to the next (size, CRC, flag, system
  flag, born and store times of a batch, ...) are made into ints once and
  shared while they repeat;
* ``MessageExt`` objects are allocated without ``__init__`` and their slots
  are filled through the slot offsets of the class (what ``m.x = v`` does,
  minus the attribute lookup), every slot written exactly once; the offset
  message id is written straight into its string.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_Copy, PyDict_GetItem, PyDict_SetItem
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdio cimport snprintf
from libc.string cimport memchr, memcmp, memcpy, memset
from rmq._fast.byteorder cimport get16, get32, get64, put32
from rmq._fast.crc32 cimport masked_crc32

import struct
import zlib

from rmq.common.exceptions import MessageDecodeError
from rmq.common.message import (
    PROPERTY_MAX_OFFSET,
    PROPERTY_MIN_OFFSET,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageExt,
)

cdef extern from "arpa/inet.h" nogil:
    const char *inet_ntop(int af, const void *src, char *dst, int size)

cdef extern from "sys/socket.h":
    int AF_INET6

cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member
    object PyType_GenericAlloc(PyTypeObject *tp, Py_ssize_t nitems)
    object PyUnicode_New(Py_ssize_t size, Py_ssize_t maxchar)
    void *PyUnicode_DATA(object o)

cdef enum:
    MESSAGE_MAGIC = -626843481
    CACHE_SIZE = 32
    HOST_SLOTS = 16
    SHORT_VALUE = 20  # longer property values (UNIQ_KEY, ...) are rarely repeated
    MAX_SEGS = 16     # records with more properties are not templates (``Shape``)
    # numbers kept while they repeat from record to record (``Repeat``)
    R_QUEUE_ID = 0
    R_SYS_FLAG = 1
    R_STORE_TS = 2
    R_SIZE = 3
    R_CRC = 4
    R_FLAG = 5
    R_BORN_TS = 6
    R_RECONSUME = 7
    R_PREPARED = 8
    R_COUNT = 9

cdef const char *HEX_DIGITS = b"0123456789ABCDEF"

cdef struct Entry:
    const uint8_t *p  # into the body being decoded (held for the whole call)
    Py_ssize_t n
    PyObject *s  # owned by the call's ``keep`` list


cdef Py_ssize_t _slot(str name) except -1:
    """Offset of ``MessageExt.<name>``'s slot inside the instance."""
    d = getattr(MessageExt, name)
    if type(d).__name__ != "member_descriptor":
        raise ImportError(f"MessageExt.{name} is not a __slots__ member")
    return (<PyMemberDescrObject *>d).d_member.offset


cdef Py_ssize_t S_TOPIC = _slot("topic")
cdef Py_ssize_t S_BODY = _slot("body")
cdef Py_ssize_t S_FLAG = _slot("flag")
cdef Py_ssize_t S_PROPERTIES = _slot("properties")
cdef Py_ssize_t S_QUEUE_ID = _slot("queue_id")
cdef Py_ssize_t S_STORE_SIZE = _slot("store_size")
cdef Py_ssize_t S_QUEUE_OFFSET = _slot("queue_offset")
cdef Py_ssize_t S_SYS_FLAG = _slot("sys_flag")
cdef Py_ssize_t S_BORN_TIMESTAMP = _slot("born_timestamp")
cdef Py_ssize_t S_BORN_HOST = _slot("born_host")
cdef Py_ssize_t S_STORE_TIMESTAMP = _slot("store_timestamp")
cdef Py_ssize_t S_STORE_HOST = _slot("store_host")
cdef Py_ssize_t S_MSG_ID = _slot("msg_id")
cdef Py_ssize_t S_OFFSET_MSG_ID = _slot("offset_msg_id")
cdef Py_ssize_t S_COMMIT_LOG_OFFSET = _slot("commit_log_offset")
cdef Py_ssize_t S_BODY_CRC = _slot("body_crc")
cdef Py_ssize_t S_RECONSUME_TIMES = _slot("reconsume_times")
cdef Py_ssize_t S_PREPARED = _slot("prepared_transaction_offset")
cdef Py_ssize_t S_BROKER_NAME = _slot("broker_name")
cdef object _EXT_TYPE = MessageExt
cdef str _UNIQ_KEY = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX


cdef inline bint _eq(const uint8_t *a, const uint8_t *b, Py_ssize_t n) noexcept nogil:
    """``a[:n] == b[:n]`` for the short texts compared per record (no call)."""
    cdef uint64_t x, y
    while n >= 8:
        memcpy(&x, a, 8)
        memcpy(&y, b, 8)
        if x != y:
            return False
        a += 8
        b += 8
        n -= 8
    while n > 0:
        if a[0] != b[0]:
            return False
        a += 1
        b += 1
        n -= 1
    return True


cdef inline void _put(object obj, Py_ssize_t offset, object value) noexcept:
    """Fill a slot of a freshly allocated object (its slots start NULL)."""
    Py_INCREF(value)
    (<PyObject **>((<char *><PyObject *>obj) + offset))[0] = <PyObject *>value


cdef object _text(Entry *tab, int *count, list keep, const uint8_t *p, Py_ssize_t n):
    """UTF-8 text of ``p[:n]`` (errors replaced), shared with earlier equal bytes."""
    cdef int i
    for i in range(count[0]):
        if tab[i].n == n and _eq(tab[i].p, p, n):
            return <object>tab[i].s
    s = PyUnicode_DecodeUTF8(<const char *>p, n, "replace")
    if count[0] < CACHE_SIZE:
        keep.append(s)
        tab[count[0]].p = p
        tab[count[0]].n = n
        tab[count[0]].s = <PyObject *>s
        count[0] += 1
    return s


cdef str _host_text(const uint8_t *p, bint v6):
    """``ip:port`` of a BORNHOST/STOREHOST field (inet_ntop, as Python's socket)."""
    cdef char ip[64]
    cdef char out[96]
    cdef int k
    if v6:
        if inet_ntop(AF_INET6, p, ip, sizeof(ip)) == NULL:
            raise MessageDecodeError("unprintable IPv6 host")
        k = snprintf(out, sizeof(out), "%s:%d", ip, <int>get32(p + 16))
    else:
        k = snprintf(out, sizeof(out), "%u.%u.%u.%u:%d", p[0], p[1], p[2], p[3],
                     <int>get32(p + 4))
    return out[:k].decode("ascii")


# BORNHOST/STOREHOST fields seen lately and their text, kept across calls (a
# consumer sees few hosts; the twin keeps a dict of them): slots filled in turn
cdef uint8_t _host_raw[HOST_SLOTS][20]
cdef Py_ssize_t _host_len[HOST_SLOTS]
cdef list _host_texts = [None] * HOST_SLOTS
cdef int _host_next = 0


cdef object _host(const uint8_t *p, bint v6):
    global _host_next
    cdef int i
    cdef Py_ssize_t n = 20 if v6 else 8
    for i in range(HOST_SLOTS):
        if _host_len[i] == n and _eq(_host_raw[i], p, n):
            return _host_texts[i]
    s = _host_text(p, v6)
    i = _host_next
    _host_next = (i + 1) % HOST_SLOTS
    memcpy(_host_raw[i], p, n)
    _host_len[i] = n
    _host_texts[i] = s
    return s


cdef str _offset_id(const uint8_t *host, Py_ssize_t host_len, int64_t phy):
    """Offset message id: STOREHOST field then PHYSICALOFFSET, upper-case hex,
    written into the string itself (an ASCII str stores one byte per char)."""
    cdef const char *hexd = HEX_DIGITS
    cdef Py_ssize_t i, k = 0
    cdef uint64_t v = <uint64_t>phy
    cdef object s = PyUnicode_New(2 * host_len + 16, 127)
    cdef char *out = <char *>PyUnicode_DATA(s)
    for i in range(host_len):
        out[k] = hexd[host[i] >> 4]
        out[k + 1] = hexd[host[i] & 15]
        k += 2
    for i in range(15, -1, -1):
        out[k + i] = hexd[v & 15]
        v >>= 4
    return s


cdef struct Repeat:
    int64_t value  # what ``obj`` holds
    PyObject *obj  # owned by the call's ``keep`` list; NULL until the first value


cdef inline object _int(Repeat *r, int64_t value, list keep):
    """``value`` as an int, the same object as the previous record's when equal."""
    if r.obj != NULL and r.value == value:
        return <object>r.obj
    cdef object o = value
    keep.append(o)
    r.value = value
    r.obj = <PyObject *>o
    return o


cdef struct Shape:
    # the properties of an earlier record of the call, as a template: its
    # segments (pointers into the body) and each segment's key object (held by
    # the template dict); n < 0 when there is no template
    int n
    const uint8_t *k[MAX_SEGS]
    Py_ssize_t kn[MAX_SEGS]
    const uint8_t *v[MAX_SEGS]
    Py_ssize_t vn[MAX_SEGS]
    PyObject *key[MAX_SEGS]
    int uniq                  # the UNIQ_KEY segment, -1 without
    PyObject *uniq_value      # its value in the template dict


cdef inline object _value(Entry *tab, int *count, list keep, const uint8_t *p, Py_ssize_t n):
    if n <= SHORT_VALUE:
        return _text(tab, count, keep, p, n)
    return PyUnicode_DecodeUTF8(<const char *>p, n, "replace")


cdef dict _properties(Entry *tab, int *count, list keep, const uint8_t *p, Py_ssize_t n,
                      Shape *sh):
    """``string2messageProperties`` on raw bytes: the separators are ASCII, so
    splitting before decoding gives the same texts as decoding first.  When
    every segment is a pair with distinct keys (and few), ``sh`` keeps them as
    the template of the records that follow."""
    cdef dict props = {}
    cdef const uint8_t *end = p + n
    cdef const uint8_t *seg_end
    cdef const uint8_t *kv
    cdef int segs = 0
    cdef bint plain = True
    sh.uniq = -1
    while p < end:
        seg_end = <const uint8_t *>memchr(p, 2, end - p)
        if seg_end == NULL:
            seg_end = end
        kv = <const uint8_t *>memchr(p, 1, seg_end - p)
        if kv != NULL and kv > p and kv < seg_end - 1:
            key = _text(tab, count, keep, p, kv - p)
            value = _value(tab, count, keep, kv + 1, seg_end - kv - 1)
            PyDict_SetItem(props, key, value)
            if segs < MAX_SEGS:
                sh.k[segs] = p
                sh.kn[segs] = kv - p
                sh.v[segs] = kv + 1
                sh.vn[segs] = seg_end - kv - 1
                sh.key[segs] = <PyObject *>key
                if kv - p == 8 and _eq(p, <const uint8_t *>b"UNIQ_KEY", 8):
                    sh.uniq = segs
                    sh.uniq_value = <PyObject *>value
            segs += 1
        else:
            plain = False
        p = seg_end + 1
    sh.n = segs if plain and segs <= MAX_SEGS and len(props) == segs else -1
    return props


cdef object _properties_like(Entry *tab, int *count, list keep, const uint8_t *p,
                             Py_ssize_t n, Shape *sh, dict template, PyObject **uniq):
    """The properties of a record whose keys are the template's, in the same
    order, each segment a pair: a copy of the template dict (no hashing or
    probing of its keys) with the values that differ set again, and its
    UNIQ_KEY value in ``uniq`` (NULL without); None for any other record."""
    cdef const uint8_t *end = p + n
    cdef const uint8_t *seg_end
    cdef const uint8_t *kv
    cdef int i = 0, nch = 0, j
    cdef int changed[MAX_SEGS]
    cdef const uint8_t *cv[MAX_SEGS]
    cdef Py_ssize_t cn[MAX_SEGS]
    cdef Py_ssize_t kn, vn
    if sh.n <= 0:
        return None
    while p < end:
        if i >= sh.n:
            return None
        seg_end = <const uint8_t *>memchr(p, 2, end - p)
        if seg_end == NULL:
            seg_end = end
        kv = <const uint8_t *>memchr(p, 1, seg_end - p)
        if kv == NULL or kv == p or kv >= seg_end - 1:
            return None
        kn = kv - p
        if kn != sh.kn[i] or not _eq(p, sh.k[i], kn):
            return None
        vn = seg_end - kv - 1
        if vn != sh.vn[i] or not _eq(kv + 1, sh.v[i], vn):
            changed[nch] = i
            cv[nch] = kv + 1
            cn[nch] = vn
            nch += 1
        i += 1
        p = seg_end + 1
    if i != sh.n:
        return None
    props = PyDict_Copy(template)
    uniq[0] = sh.uniq_value if sh.uniq >= 0 else NULL
    for j in range(nch):
        value = _value(tab, count, keep, cv[j], cn[j])
        PyDict_SetItem(props, <object>sh.key[changed[j]], value)
        if changed[j] == sh.uniq:
            uniq[0] = <PyObject *>value  # held by ``props``
    return props


cdef bytes _inflate(bytes raw, int32_t sys_flag):
    if (sys_flag & 0x700) != 0 and (sys_flag & 0x700) != 0x300:
        raise MessageDecodeError(f"unsupported compression type in sysFlag {sys_flag:#x}")
    try:
        return zlib.decompress(raw)
    except zlib.error as e:
        raise MessageDecodeError(f"corrupt compressed body: {e}") from None


def decode_messages(body, str broker_name="", min_offset=None, max_offset=None,
                    bint check_crc=False):
    """Every record of a pull/query/view body as ``MessageExt``; see the twin in
    rmq/client/codec.py for the contract."""
    cdef Py_buffer view
    cdef const uint8_t *b
    cdef const uint8_t *r
    cdef Py_ssize_t n, pos = 0, end, size, body_len, topic_len, props_len
    cdef Py_ssize_t born_end, store_end, body_pos, topic_pos, props_pos
    cdef int32_t sys_flag
    cdef Entry texts[CACHE_SIZE]
    cdef int n_texts = 0
    cdef Repeat rep[R_COUNT]
    cdef Shape shape
    cdef PyObject *uniq
    cdef dict template = None
    cdef list keep = []
    cdef list out = []
    cdef dict props
    extra = []
    if min_offset is not None:
        extra.append((PROPERTY_MIN_OFFSET, str(min_offset)))
    if max_offset is not None:
        extra.append((PROPERTY_MAX_OFFSET, str(max_offset)))
    memset(rep, 0, sizeof(rep))
    shape.n = -1
    PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
    try:
        b = <const uint8_t *>view.buf
        n = view.len
        while pos < n:
            r = b + pos
            if pos + 48 > n:
                raise MessageDecodeError(f"bad message record at byte {pos} of {n}")
            size = get32(r)
            end = pos + size
            if get32(r + 4) != MESSAGE_MAGIC or size < 91 or end > n:
                raise MessageDecodeError(f"bad message record at byte {pos} of {n}")
            sys_flag = get32(r + 36)
            born_end = pos + (68 if sys_flag & 0x10 else 56)
            store_end = born_end + 8 + (20 if sys_flag & 0x20 else 8)
            body_pos = store_end + 16
            if body_pos + 3 > end:
                raise MessageDecodeError(f"bad message record at byte {pos} of {n}")
            body_len = get32(b + store_end + 12)
            topic_pos = body_pos + body_len
            if body_len < 0 or topic_pos + 3 > end:
                raise MessageDecodeError(f"bad message record at byte {pos} of {n}")
            topic_len = b[topic_pos]
            props_pos = topic_pos + 3 + topic_len
            if topic_len > 127 or props_pos > end:
                raise MessageDecodeError(f"bad message record at byte {pos} of {n}")
            props_len = get16(b + props_pos - 2)
            if props_pos + props_len != end:
                raise MessageDecodeError(f"bad message record at byte {pos} of {n}")
            if check_crc and body_len and (
                    masked_crc32(b + body_pos, <size_t>body_len) != get32(r + 8)):
                raise MessageDecodeError(f"body CRC mismatch at byte {pos} of {n}")
            m = PyType_GenericAlloc(<PyTypeObject *>_EXT_TYPE, 0)
            _put(m, S_TOPIC, _text(texts, &n_texts, keep, b + topic_pos + 1, topic_len))
            _put(m, S_QUEUE_ID, _int(&rep[R_QUEUE_ID], get32(r + 12), keep))
            _put(m, S_QUEUE_OFFSET, get64(r + 20))
            _put(m, S_COMMIT_LOG_OFFSET, get64(r + 28))
            _put(m, S_SYS_FLAG, _int(&rep[R_SYS_FLAG], sys_flag, keep))
            _put(m, S_STORE_TIMESTAMP, _int(&rep[R_STORE_TS], get64(b + born_end), keep))
            _put(m, S_STORE_SIZE, _int(&rep[R_SIZE], size, keep))
            _put(m, S_BODY_CRC, _int(&rep[R_CRC], get32(r + 8), keep))
            _put(m, S_FLAG, _int(&rep[R_FLAG], get32(r + 16), keep))
            _put(m, S_BORN_TIMESTAMP, _int(&rep[R_BORN_TS], get64(r + 40), keep))
            _put(m, S_BORN_HOST, _host(r + 48, sys_flag & 0x10))
            _put(m, S_STORE_HOST, _host(b + born_end + 8, sys_flag & 0x20))
            _put(m, S_RECONSUME_TIMES, _int(&rep[R_RECONSUME], get32(b + store_end), keep))
            _put(m, S_PREPARED, _int(&rep[R_PREPARED], get64(b + store_end + 4), keep))
            raw = PyBytes_FromStringAndSize(<const char *>(b + body_pos), body_len)
            _put(m, S_BODY, _inflate(raw, sys_flag) if sys_flag & 1 else raw)
            uniq = NULL
            if props_len:
                like = _properties_like(texts, &n_texts, keep, b + props_pos, props_len, &shape,
                                        template, &uniq)
                if like is not None:
                    props = <dict>like  # the template's extras are this record's too
                else:
                    props = _properties(texts, &n_texts, keep, b + props_pos, props_len, &shape)
                    for k, v in extra:
                        if shape.n > 0 and k in props:
                            shape.n = -1  # a property named as an extra: no template
                        PyDict_SetItem(props, k, v)
                    template = props if shape.n > 0 else None
            else:
                props = {}
                for k, v in extra:
                    PyDict_SetItem(props, k, v)
            _put(m, S_PROPERTIES, props)
            offset_id = _offset_id(b + born_end + 8, store_end - born_end - 8, get64(r + 28))
            _put(m, S_OFFSET_MSG_ID, offset_id)
            if uniq == NULL:
                uniq = PyDict_GetItem(props, _UNIQ_KEY)
            _put(m, S_MSG_ID, <object>uniq if uniq != NULL else offset_id)
            _put(m, S_BROKER_NAME, broker_name)
            out.append(m)
            pos = end
    finally:
        PyBuffer_Release(&view)
    return out


# ---- SEND_BATCH_MESSAGE body ------------------------------------------------------

cdef enum:
    BATCH_HEAD = 20  # TOTALSIZE, MAGIC, BODYCRC, FLAG, BODYLENGTH


cdef str _props_text(object props):
    """The twin's ``properties_string``: all-text pairs joined in C, else the
    general form (None values left out, others through ``str``)."""
    try:
        return "\x02".join(map("\x01".join, props.items()))
    except TypeError:
        return "\x02".join([f"{k}\x01{v}" for k, v in props.items() if v is not None])


def encode_batch(msgs):
    """The SEND_BATCH_MESSAGE body of ``msgs``: same bytes and same errors as
    the twin in rmq/client/codec.py.  Two passes: the first collects each
    message's body and properties text and checks every length (struct.error
    as the twin's packing), the second writes into one exactly sized bytes."""
    cdef list items = []
    cdef Py_ssize_t total = 0, blen, plen, pos = 0
    cdef int64_t flag
    cdef const char *ptext
    cdef char *out
    for msg in msgs:
        props = _props_text(msg.properties).encode("utf-8")
        body = msg.body
        if type(body) is not bytes:
            body = bytes(body)
        f = msg.flag
        if not isinstance(f, int):
            raise struct.error("required argument is not an integer")
        if not -2147483648 <= f <= 2147483647:
            raise struct.error("'i' format requires -2147483648 <= number <= 2147483647")
        blen = len(<bytes>body)
        plen = len(<bytes>props)
        if BATCH_HEAD + 2 + blen + plen > 2147483647:
            raise struct.error("'i' format requires -2147483648 <= number <= 2147483647")
        if plen > 32767:
            raise struct.error("'h' format requires -32768 <= number <= 32767")
        items.append((body, props, f))
        total += BATCH_HEAD + 2 + blen + plen
    result = PyBytes_FromStringAndSize(NULL, total)
    out = <char *>(<bytes>result)
    for body, props, f in items:
        blen = len(<bytes>body)
        plen = len(<bytes>props)
        flag = f
        put32(<uint8_t *>out + pos, BATCH_HEAD + 2 + blen + plen)
        put32(<uint8_t *>out + pos + 4, 0)
        put32(<uint8_t *>out + pos + 8, 0)
        put32(<uint8_t *>out + pos + 12, flag)
        put32(<uint8_t *>out + pos + 16, blen)
        pos += BATCH_HEAD
        memcpy(out + pos, <const char *>(<bytes>body), blen)
        pos += blen
        out[pos] = <char>((plen >> 8) & 0xFF)
        out[pos + 1] = <char>(plen & 0xFF)
        pos += 2
        memcpy(out + pos, <const char *>(<bytes>props), plen)
        pos += plen
    return result
