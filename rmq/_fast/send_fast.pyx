# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of ``_fast_send_properties`` in rmq/store/message_codec.py,
and the property scan (``send_props``) the compiled send lane cimports.

``fast_send_properties`` turns a SEND_MESSAGE(_V2) request's property string
into what the single-send fast path needs, without building the property
map: the stored string (STORE_FORMAT.md 3.2: java.util.HashMap order, WAIT
left out, CLUSTER added), the tagsCode, ``isWaitStoreMsgOK``, whether DELAY
or TRAN_MSG is present (the caller then takes the general path) and the KEYS
and UNIQ_KEY values for the index.  Same inputs, same outputs as the twin.

The common case (an ASCII string of at most MAX_SEGS segments, no key twice,
no CLUSTER sent, an ASCII cluster name) is one C scan: known keys are
recognised by length and bytes, the stored string is assembled by copying
the request's own ``key\\x01value`` segments in HashMap order, the tagsCode
is Java's ``String.hashCode`` computed over the ASCII bytes.  The HashMap
order of a key sequence (a permutation of the segments) comes from a small
C table keyed by a hash of the key bytes and checked against a copy of
them, so a repeated sequence creates no Python object; a new sequence asks
the twin module's ``_hashmap_order`` once (one rule for both builds).
Anything else goes to the twin itself.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy
from rmq._fast.record cimport utf8_hash

cdef extern from "Python.h":
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    void *PyUnicode_DATA(object o)
    int PyUnicode_IS_ASCII(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)

DEF MAX_SEGS = 64
DEF PERM_SLOTS = 256  # a power of two

cdef extern from *:
    """
    #define RMQ_FNV_OFFSET 14695981039346656037ULL
    #define RMQ_FNV_PRIME 1099511628211ULL
    """
    unsigned long long FNV_OFFSET "RMQ_FNV_OFFSET"  # FNV-1a, 64 bits
    unsigned long long FNV_PRIME "RMQ_FNV_PRIME"


ctypedef struct PermEntry:
    unsigned long long hash      # FNV-1a of ``sig``
    Py_ssize_t siglen
    Py_ssize_t nsegs             # segments in the request (WAIT included)
    Py_ssize_t nout              # stored segments, CLUSTER included
    char *sig                    # the keys in request order, each followed by \x01
    unsigned char perm[MAX_SEGS + 1]  # segment index per stored position; nsegs = CLUSTER


cdef PermEntry _perms[PERM_SLOTS]
cdef object _hashmap_order = None
cdef object _general = None


def bind(hashmap_order, general):
    """The twin module's key-order rule and its whole function (the route for
    anything unusual), so both builds follow one rule."""
    global _hashmap_order, _general
    _hashmap_order = hashmap_order
    _general = general


cdef inline object _ascii(const char *p, Py_ssize_t n):
    """A str of ``n`` ASCII bytes (no decoding step)."""
    s = PyUnicode_New(n, 127)
    memcpy(PyUnicode_DATA(s), p, n)
    return s


cdef inline bint _is_true(const char *p, Py_ssize_t n) noexcept:
    """``Boolean.parseBoolean``: "true" in any letter case."""
    return n == 4 and (p[0] | 0x20) == 116 and (p[1] | 0x20) == 114 and \
        (p[2] | 0x20) == 117 and (p[3] | 0x20) == 101


cdef bint _same_keys(PermEntry *e, unsigned long long h, Py_ssize_t siglen, const char *p,
                     Py_ssize_t *starts, Py_ssize_t *klens, Py_ssize_t count) noexcept:
    """Whether the cached entry is this request's key sequence."""
    if e.sig == NULL or e.hash != h or e.siglen != siglen or e.nsegs != count:
        return False
    cdef Py_ssize_t j, off = 0
    for j in range(count):
        if memcmp(e.sig + off, p + starts[j], klens[j]) != 0 or e.sig[off + klens[j]] != 1:
            return False
        off += klens[j] + 1
    return True


cdef bint _learn(PermEntry *e, unsigned long long h, Py_ssize_t siglen, const char *p,
                 Py_ssize_t *starts, Py_ssize_t *klens, Py_ssize_t count,
                 Py_ssize_t wait_seg) except -1:
    """Fill ``e`` with the HashMap order of this key sequence; False when a
    key comes twice (the general route handles "later wins")."""
    keys = [_ascii(p + starts[j], klens[j]) for j in range(count)]
    if len(set(keys)) != count:
        return False
    segs = [j for j in range(count) if j != wait_seg]
    seq = tuple([keys[j] for j in segs]) + ("CLUSTER",)
    segs.append(count)
    order = _hashmap_order(seq)
    cdef Py_ssize_t nout = len(order)
    perm = [segs[seq.index(k)] for k in order]
    cdef char *sig = <char *>malloc(siglen if siglen > 0 else 1)
    if sig == NULL:
        raise MemoryError()
    cdef Py_ssize_t j, off = 0
    for j in range(count):
        memcpy(sig + off, p + starts[j], klens[j])
        sig[off + klens[j]] = 1
        off += klens[j] + 1
    free(e.sig)
    e.sig = sig
    e.hash = h
    e.siglen = siglen
    e.nsegs = count
    e.nout = nout
    for j in range(nout):
        e.perm[j] = <unsigned char>perm[j]
    return True


cdef Py_ssize_t send_props(const char *p, Py_ssize_t n, const char *cluster, Py_ssize_t clen,
                           char *out, SendProps *r) except -2:
    """The stored string of the ASCII properties ``p[:n]`` written at ``out``
    (room for ``n + clen + 9`` bytes) and the rest of ``r``; its length, or
    -1 for what the general route decides (too many segments, CLUSTER sent,
    a key twice)."""
    cdef Py_ssize_t starts[MAX_SEGS]
    cdef Py_ssize_t klens[MAX_SEGS]
    cdef Py_ssize_t slens[MAX_SEGS]
    cdef Py_ssize_t count = 0, start = 0, first = -1, i, j, k, slen, siglen = 0
    cdef Py_ssize_t wait_seg = -1, tags_seg = -1, keys_seg = -1, uniq_seg = -1
    cdef bint special = False
    cdef unsigned long long h = FNV_OFFSET
    cdef char c
    cdef const char *q
    # one scan: the valid segments (a \x01 neither first nor last), known keys
    i = 0
    while i <= n:
        c = p[i] if i < n else 2
        if c == 1 and first < 0:
            first = i
        elif c == 2:
            slen = i - start
            k = first - start
            if first > start and k < slen - 1:
                if count == MAX_SEGS:
                    return -1
                q = p + start
                for j in range(k):
                    if <unsigned char>q[j] >= 0x80:
                        return -1  # a non-ASCII key: its HashMap place is the general route's
                if k == 4:
                    if memcmp(q, b"TAGS", 4) == 0:
                        tags_seg = count
                    elif memcmp(q, b"KEYS", 4) == 0:
                        keys_seg = count
                    elif memcmp(q, b"WAIT", 4) == 0:
                        wait_seg = count
                elif k == 8:
                    if memcmp(q, b"UNIQ_KEY", 8) == 0:
                        uniq_seg = count
                    elif memcmp(q, b"TRAN_MSG", 8) == 0:
                        special = True
                elif k == 5 and memcmp(q, b"DELAY", 5) == 0:
                    special = True
                elif k >= 6 and memcmp(q, b"TIMER_", 6) == 0:
                    special = True  # a timer message: the put hook parks it
                elif k == 7 and memcmp(q, b"CLUSTER", 7) == 0:
                    return -1  # the sender's CLUSTER keeps its place
                for j in range(k):
                    h = (h ^ <unsigned char>q[j]) * FNV_PRIME
                h = (h ^ 1) * FNV_PRIME
                siglen += k + 1
                starts[count] = start
                klens[count] = k
                slens[count] = slen
                count += 1
            start = i + 1
            first = -1
        i += 1
    # the stored order: from the table, or learnt once for a new key sequence
    cdef PermEntry *e = &_perms[(h ^ (h >> 29)) & (PERM_SLOTS - 1)]
    if not _same_keys(e, h, siglen, p, starts, klens, count):
        if not _learn(e, h, siglen, p, starts, klens, count, wait_seg):
            return -1  # a key twice
    cdef unsigned char perm[MAX_SEGS + 1]
    cdef Py_ssize_t nout = e.nout
    memcpy(perm, e.perm, nout)
    # the stored string: the request's segments in that order, CLUSTER added
    cdef Py_ssize_t pos = 0
    for j in range(nout):
        if j:
            out[pos] = 2
            pos += 1
        k = perm[j]
        if k == count:
            memcpy(out + pos, b"CLUSTER\x01", 8)
            memcpy(out + pos + 8, cluster, clen)
            pos += 8 + clen
        else:
            memcpy(out + pos, p + starts[k], slens[k])
            pos += slens[k]
    # the values the caller needs
    r.tags_code = 0
    if tags_seg >= 0:
        q = p + starts[tags_seg] + 5
        r.tags_code = utf8_hash(0, <const uint8_t *>q, slens[tags_seg] - 5)
    r.wait = True
    if wait_seg >= 0:
        r.wait = _is_true(p + starts[wait_seg] + 5, slens[wait_seg] - 5)
    r.special = special
    r.keys_at = r.uniq_at = -1
    r.keys_len = r.uniq_len = 0
    if keys_seg >= 0:
        r.keys_at = starts[keys_seg] + 5
        r.keys_len = slens[keys_seg] - 5
    if uniq_seg >= 0:
        r.uniq_at = starts[uniq_seg] + 9
        r.uniq_len = slens[uniq_seg] - 9
    return pos


def fast_send_properties(text, cluster):
    """(stored string, tagsCode, wait for the flush, DELAY or TRAN_MSG sent,
    KEYS value or None, UNIQ_KEY value or None); see the module docstring."""
    if type(text) is not str or type(cluster) is not str or not PyUnicode_IS_ASCII(text) \
            or not PyUnicode_IS_ASCII(cluster):
        return _general(text, cluster)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    cdef Py_ssize_t clen = PyUnicode_GET_LENGTH(cluster)
    cdef const char *p = <const char *>PyUnicode_DATA(text)
    cdef SendProps r
    cdef char *out = <char *>malloc(n + clen + 9)
    if out == NULL:
        raise MemoryError()
    cdef Py_ssize_t total
    try:
        total = send_props(p, n, <const char *>PyUnicode_DATA(cluster), clen, out, &r)
        if total < 0:
            return _general(text, cluster)
        stored = _ascii(out, total)
    finally:
        free(out)
    keys = None if r.keys_at < 0 else _ascii(p + r.keys_at, r.keys_len)
    uniq = None if r.uniq_at < 0 else _ascii(p + r.uniq_at, r.uniq_len)
    return stored, r.tags_code, r.wait, r.special, keys, uniq
