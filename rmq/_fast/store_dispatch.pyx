# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twin of ``rmq.store.dispatch._dispatch_run``: dispatch a run of
consecutive commit log records of one topic/queue straight into the consume
queue file and the index file, with no Python object per message.

The run stops (and Python's per-record path takes over) at the first record
that is not a plain message of the same topic/queue, carries DELAY, is not
the next entry of the consume queue file, is already dispatched, has a
non-ASCII key, or does not fit into the consume queue / index file.

With ``entry_header`` (DLedger's 48 bytes) every record lies in an entry of
its own, behind that header: the entry's size word (at 4) must be the
record's size plus the header, and a blank (magic -1) ends the run, as
``DLedgerCommitLog.dispatch_entries`` walks them.
"""

from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t
from rmq._fast.byteorder cimport put32, put64, get32, get64, get16
from rmq._fast.record cimport Props, ascii_hash, find_props, index_prop_keys, prop_keys
from libc.string cimport memcmp


cdef enum:
    MESSAGE_MAGIC = -626843481


def dispatch_run(const uint8_t[::1] buf, Py_ssize_t pos, Py_ssize_t limit, const uint8_t[::1] topic,
                 int queue_id, uint8_t[::1] cq, Py_ssize_t cq_pos, long long cq_base,
                 long long max_physic_offset, index, long long max_slots, long long max_index,
                 Py_ssize_t entry_header=0):
    """Returns ``(pos, cq_pos, count, max_physic_offset, last)`` where ``last``
    is ``None`` or ``(queue_offset, tags_code, store_ts)``
    of the last record dispatched.  ``index`` is the writable buffer of the
    current index file or None when indexing is off."""
    if pos < 0 or limit > buf.shape[0] or cq_pos < 0 or cq_pos > cq.shape[0] or cq_pos % 20 \
            or entry_header < 0:
        raise ValueError("bad dispatch range")
    cdef uint8_t[::1] ib
    cdef uint8_t *ix = NULL
    if index is not None:
        ib = index
        if max_slots <= 0 or max_index <= 0 or ib.shape[0] < 40 + max_slots * 4 + max_index * 20:
            raise ValueError("index buffer smaller than its layout")
        ix = &ib[0]
    cdef const uint8_t *b = &buf[0] if buf.shape[0] else NULL
    cdef const uint8_t *t = &topic[0] if topic.shape[0] else NULL
    cdef Py_ssize_t tlen = topic.shape[0]
    cdef uint8_t *c = &cq[0] if cq.shape[0] else NULL
    cdef Py_ssize_t cq_len = cq.shape[0]
    cdef int32_t topic_hash = ascii_hash(0, t, tlen)
    cdef Py_ssize_t count = 0, size, body_len, topic_len, props_len
    cdef const uint8_t *r
    cdef const uint8_t *e
    cdef const uint8_t *p
    cdef const uint8_t *props
    cdef int32_t sys_flag, tx, qid, tags_code
    cdef int64_t qoff, phy, store_ts, end_phy
    cdef Props pr
    cdef int64_t last_qoff = -1, last_ts = 0
    cdef int32_t last_tags = 0
    for k in range(tlen):
        if t[k] >= 0x80:
            return pos, cq_pos, 0, max_physic_offset, None
    with nogil:
        while pos + entry_header + 91 <= limit and cq_pos + 20 <= cq_len:
            e = b + pos
            r = e + entry_header
            size = get32(r)
            if get32(r + 4) != MESSAGE_MAGIC or size < 91 or pos + entry_header + size > limit:
                break
            if entry_header and (get32(e) == -1 or get32(e + 4) != size + entry_header):
                break
            qid = get32(r + 12)
            qoff = get64(r + 20)
            phy = get64(r + 28)
            sys_flag = get32(r + 36)
            tx = sys_flag & 0xC
            if qid != queue_id or (tx != 0 and tx != 8) or cq_base + cq_pos != qoff * 20:
                break
            if phy + size <= max_physic_offset:
                break
            p = r + 48 + (20 if sys_flag & 0x10 else 8)
            store_ts = get64(p)
            p += 8 + (20 if sys_flag & 0x20 else 8)
            body_len = get32(p + 12)
            p += 16
            if body_len < 0 or body_len > size - 91:
                break
            p += body_len
            topic_len = p[0]
            if topic_len != tlen or memcmp(p + 1, t, tlen) != 0:
                break
            p += 1 + topic_len
            props_len = get16(p)
            props = p + 2
            if props_len < 0 or props + props_len != r + size:
                break
            find_props(props, props_len, &pr)
            if pr.delay or pr.non_ascii:
                break
            if ix != NULL and (pr.keys_at >= 0 or pr.uniq_at >= 0):
                if phy >= get64(ix + 24):  # not indexed yet (endPhyOffset rule)
                    if max(1, get32(ix + 36)) + prop_keys(props, &pr) > max_index:
                        break
                    index_prop_keys(ix, max_slots, max_index, topic_hash, props, &pr, phy, store_ts)
            if pr.tags_at >= 0:
                tags_code = ascii_hash(0, props + pr.tags_at, pr.tags_len)
            else:
                tags_code = 0
            put64(c + cq_pos, phy)
            put32(c + cq_pos + 8, <int32_t>size)
            put64(c + cq_pos + 12, <int64_t>tags_code)
            cq_pos += 20
            end_phy = phy + size
            max_physic_offset = end_phy
            last_qoff = qoff
            last_tags = tags_code
            last_ts = store_ts
            pos += entry_header + size
            count += 1
    if count == 0:
        return pos, cq_pos, 0, max_physic_offset, None
    return pos, cq_pos, count, max_physic_offset, (last_qoff, last_tags, last_ts)
