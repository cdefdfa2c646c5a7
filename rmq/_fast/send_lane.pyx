# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twin of ``SendLane`` in rmq/broker/send_lane.py: the plain sends
(single and batch) at the start of a read, from the receive buffer to the
response bytes in one call.

For each frame it reads the header without building a Python object -- a
JSON header's extFields values are located in its text and decoded into
scratch buffers, a ROCKETMQ header's length-prefixed values are taken where
they lie (``parse_head_rmq``) -- checks what the twin checks, and writes the
commit-log record, the consume-queue entry, the index keys and the response
frame (in the request's serialization) straight into their buffers.  Python is asked only once per read
(``SendLaneSupport.begin`` / ``end``) and the first time a read meets a topic
or a queue.  Whatever this reader does not take for certain -- escapes in
keys or numbers, floats, non-ASCII topics or properties, headers of more
than 4 KiB or ``MAX_EXT`` entries -- ends the lane's turn, and the general
path, which decides everything, serves the frame; so the stored bytes and
responses are the general path's in every case.
"""

cimport cython

from functools import partial

from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcmp, memcpy, memset
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec

from rmq._fast.byteorder cimport get32, get64, put32, put64
from rmq._fast.dledger_append cimport Plain, Put, c_append_plain
from rmq._fast.lane_runs cimport c_put_counts, counted_walk, forms_want
from rmq._fast.lane_runs import on_counted_runs
from rmq.common.message import PERM_WRITE
from rmq.common.topic_config import MULTI_TAG
from rmq.common.topics import NOT_ALLOWED_SEND_TOPICS, RETRY_GROUP_TOPIC_PREFIX
from rmq._fast.index_slot cimport index_count, index_put
from rmq._fast.json_text cimport (
    JV_FAIL,
    JV_FALSE,
    JV_INT,
    JV_NULL,
    JV_OTHER,
    JV_STR,
    JV_TRUE,
    JIndex,
    JStr,
    header_utf8,
    json_index,
    json_index_words,
    json_literal,
    json_number,
    json_scalar,
    json_scan_string,
    json_skip_value,
    json_string_valid,
    json_unescape,
    json_utf8_valid,
    json_write_int,
    json_ws,
)
from rmq._fast.record cimport (
    Props,
    ascii_hash,
    c_record_size,
    c_write_record,
    count_keys,
    direct_tail_of,
    index_key_hash,
    is_ascii,
)
from rmq._fast.send_fast cimport SendProps, ascii_int, java_int, send_props
from rmq._fast.protocol_reads cimport write_frames
from rmq._fast.slots cimport set_slot_or_attr, slot_or_attr
from rmq._fast.store_stats cimport PutCounters, counters_of
from rmq._fast.store_put cimport ClassOffsets, PutLocks, give_locks, take_locks
from rmq._fast.store_batch cimport KEPT, check_wire, write_all

cdef extern from "Python.h":
    object PyUnicode_New(Py_ssize_t size, Py_ssize_t maxchar)
    void *PyUnicode_DATA(object o)

cdef extern from *:
    """
    #define rmq_prefetch_w(p) __builtin_prefetch((const void *)(p), 1)
    """
    void prefetch_w "rmq_prefetch_w"(const void* p) noexcept nogil

cdef enum:
    NF = 14              # send header fields: V1 names / V2 letters "a".."n"
    MAX_HEADER = 4096    # longer JSON headers go the general way
    HEADER_WORDS = 64    # MAX_HEADER / 64: the header's index bitmap
    CQ_UNIT = 20
    SEND_V1 = 10
    SEND_V2 = 310
    SEND_BATCH = 320
    RPC_RESPONSE = 1
    RPC_ONEWAY = 2
    MULTI_TAGS_FLAG = 0x2
    TX_BITS = 0xC
    MAX_TOPIC = 127
    MAX_PROPS = 32767
    RESPONSE_ROOM = 160  # a response without the tail and the host hex
    ANSWERED_SIZE = 9    # an answered send's (opaque, serialize type): struct "<qB"
    BORNHOST_V6 = 0x10   # a record's sysFlag bits: an IPv6 born host, store host
    STOREHOST_V6 = 0x20

cdef const char *HEX = b"0123456789ABCDEF"
cdef const char *V1_NAMES[NF]
V1_NAMES[:] = [b"producerGroup", b"topic", b"defaultTopic", b"defaultTopicQueueNums",
               b"queueId", b"sysFlag", b"bornTimestamp", b"flag", b"properties",
               b"reconsumeTimes", b"unitMode", b"maxReconsumeTimes", b"batch", b"bname"]
cdef Py_ssize_t V1_LENS[NF]
V1_LENS[:] = [13, 5, 12, 21, 7, 7, 13, 4, 10, 14, 8, 17, 5, 5]


cdef struct Field:
    int kind             # JV_STR / JV_INT / JV_TRUE / JV_FALSE, 0 when absent
    JStr s               # the string (JV_STR)
    const uint8_t* start # the value's text (JV_INT: its digits)
    const uint8_t* stop


cdef struct SendFields:
    int64_t qid, sys_flag, born_ts, mflag, reconsume
    const uint8_t* tp        # the topic's ASCII bytes, in the header
    Py_ssize_t tlen
    Field* props             # the properties field


cdef struct Head:
    int64_t code, flag, opaque
    int stype                # 0 JSON, 1 ROCKETMQ: the answer is written in the same
    Field v1[NF]
    Field v2[NF]
    const uint8_t* body
    Py_ssize_t body_len
    Py_ssize_t frame_end


cdef inline int field_of_v1(const uint8_t* s, Py_ssize_t n) noexcept nogil:
    cdef int i
    for i in range(NF):
        if V1_LENS[i] == n and memcmp(V1_NAMES[i], s, n) == 0:
            return i
    return -1


cdef inline bint header_int(int kind, int64_t v, int64_t* out) noexcept nogil:
    """code/flag/opaque/version: an int32, or null (0), as the general reader takes them."""
    if kind == JV_NULL:
        out[0] = 0
        return True
    if kind == JV_INT and -2147483648 <= v <= 2147483647:
        out[0] = v
        return True
    return False


cdef const uint8_t* scan_ext(const JIndex* ix, const uint8_t* p, const uint8_t* end,
                             Head* h) noexcept nogil:
    """The extFields object at ``p`` (its '{') into ``h``; the byte after it,
    or NULL for anything the lane leaves to the general path."""
    cdef JStr k
    cdef Field f
    cdef Field* slot
    cdef int64_t ival
    cdef int idx
    p = json_ws(p + 1, end)
    if p < end and p[0] == 125:
        return p + 1
    while True:
        if p >= end or p[0] != 34:
            return NULL
        p = json_scan_string(ix, p, end, &k)
        if p == NULL or k.esc or not json_string_valid(&k):
            return NULL
        p = json_ws(p, end)
        if p >= end or p[0] != 58:
            return NULL
        p = json_ws(p + 1, end)
        f.start = p
        p = json_scalar(ix, p, end, &f.s, &f.kind, &ival)
        if f.kind == JV_FAIL:
            return NULL
        if f.kind == JV_STR and not json_string_valid(&f.s):
            return NULL
        f.stop = p
        slot = NULL
        if k.n == 1 and 97 <= k.s[0] <= 110:
            slot = &h.v2[k.s[0] - 97]
        else:
            idx = field_of_v1(k.s, k.n)
            if idx >= 0:
                slot = &h.v1[idx]
        if slot != NULL:
            if f.kind == JV_OTHER:
                return NULL  # a fraction: its text is not what the general path stores
            slot[0] = f
            if f.kind == JV_NULL:
                slot.kind = 0  # null: absent, and a later key wins
        p = json_ws(p, end)
        if p >= end:
            return NULL
        if p[0] == 125:
            return p + 1
        if p[0] != 44:
            return NULL
        p = json_ws(p + 1, end)


cdef inline bint frame_prefix(const uint8_t* b, Py_ssize_t pos, Py_ssize_t end,
                              Py_ssize_t max_frame, int stype, Py_ssize_t min_head,
                              Py_ssize_t* length, Py_ssize_t* hlen) noexcept nogil:
    """The 8-byte prefix of the frame at ``b[pos:end]``: the whole frame is
    there, no longer than ``max_frame``, and its header is of serialization
    ``stype``, ``min_head`` to ``MAX_HEADER`` bytes long and inside the frame;
    its length (after the length field) and the header's into ``length`` and
    ``hlen``."""
    if end - pos < 8:
        return False
    cdef int32_t n = get32(b + pos)
    if n < 4 or n > max_frame or end - pos - 4 < n:
        return False
    cdef int32_t mark = get32(b + pos + 4)
    cdef Py_ssize_t h = mark & 0xFFFFFF
    if (mark >> 24) != stype or h > n - 4 or h > MAX_HEADER or h < min_head:
        return False
    length[0] = n
    hlen[0] = h
    return True


cdef inline bint frame_done(Head* h, const uint8_t* body, Py_ssize_t pos, Py_ssize_t length,
                            Py_ssize_t hlen, int stype) noexcept nogil:
    """The end of both header readers: a send request (not a response) with
    its body after the header; False for anything else."""
    if (h.code != SEND_V2 and h.code != SEND_V1 and h.code != SEND_BATCH) or \
            h.flag & RPC_RESPONSE:
        return False
    h.body = body
    h.body_len = length - 4 - hlen
    h.frame_end = pos + 4 + length
    h.stype = stype
    return True


cdef bint parse_head(const uint8_t* b, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t max_frame,
                     Head* h) noexcept nogil:
    """The complete send request with a JSON header at ``b[pos:end]`` into
    ``h``; False for anything else (incomplete, another code, a response, a
    header this reader leaves to the general path)."""
    cdef Py_ssize_t length, hlen
    if not frame_prefix(b, pos, end, max_frame, 0, 1, &length, &hlen):
        return False
    cdef const uint8_t* data = b + pos + 8
    cdef const uint8_t* end_h = data + hlen
    cdef uint64_t bm[HEADER_WORDS]
    cdef JIndex ix
    cdef JStr k, s
    cdef int kind, i
    cdef int64_t ival
    cdef bint has_ext = False, has_code = False
    ix.base = data
    ix.bm = bm
    ix.wide = json_index(data, hlen, bm)
    for i in range(NF):
        h.v1[i].kind = 0
        h.v2[i].kind = 0
    h.code = h.flag = h.opaque = 0
    cdef const uint8_t* p = json_ws(data, end_h)
    if p >= end_h or p[0] != 123:
        return False
    p = json_ws(p + 1, end_h)
    if p < end_h and p[0] == 125:
        return False
    while True:
        if p >= end_h or p[0] != 34:
            return False
        p = json_scan_string(&ix, p, end_h, &k)
        if p == NULL or k.esc or not json_string_valid(&k):
            return False
        p = json_ws(p, end_h)
        if p >= end_h or p[0] != 58:
            return False
        p = json_ws(p + 1, end_h)
        if k.n == 9 and memcmp(k.s, b"extFields", 9) == 0:
            if p >= end_h or p[0] != 123:
                return False
            p = scan_ext(&ix, p, end_h, h)
            if p == NULL:
                return False
            has_ext = True
        elif (k.n == 4 and (memcmp(k.s, b"code", 4) == 0 or memcmp(k.s, b"flag", 4) == 0)) \
                or (k.n == 6 and memcmp(k.s, b"opaque", 6) == 0) \
                or (k.n == 7 and memcmp(k.s, b"version", 7) == 0):
            p = json_scalar(&ix, p, end_h, &s, &kind, &ival)
            if k.s[0] == 99:
                if not header_int(kind, ival, &h.code):
                    return False
                has_code = True
            elif k.s[0] == 102:
                if not header_int(kind, ival, &h.flag):
                    return False
            elif k.s[0] == 111:
                if not header_int(kind, ival, &h.opaque):
                    return False
            elif not header_int(kind, ival, &ival):
                return False
        elif k.n == 8 and memcmp(k.s, b"language", 8) == 0:
            p = json_scalar(&ix, p, end_h, &s, &kind, &ival)
            if kind == JV_STR:
                if s.esc or not json_string_valid(&s):
                    return False
            elif kind != JV_INT and kind != JV_NULL:
                return False
        else:  # remark, serializeTypeCurrentRPC, anything else: checked, not used
            p = json_skip_value(&ix, p, end_h, 1, &kind)
            if kind == JV_FAIL:
                return False
        p = json_ws(p, end_h)
        if p >= end_h:
            return False
        if p[0] == 125:
            p += 1
            break
        if p[0] != 44:
            return False
        p = json_ws(p + 1, end_h)
    if json_ws(p, end_h) != end_h or not has_ext or not has_code:
        return False
    return frame_done(h, end_h, pos, length, hlen, 0)


cdef bint parse_head_rmq(const uint8_t* b, Py_ssize_t pos, Py_ssize_t end,
                         Py_ssize_t max_frame, Head* h) noexcept nogil:
    """The complete send request with a ROCKETMQ binary header at
    ``b[pos:end]`` into ``h`` (``parse_head``'s contract): its extFields
    values are length-prefixed texts without escapes, taken where they lie;
    an entry with an empty key or value is skipped and a later key wins, as
    the general reader has it.  False for anything else (incomplete, another code, a
    response, a length outside the header, text that is not UTF-8)."""
    cdef Py_ssize_t length, hlen
    if not frame_prefix(b, pos, end, max_frame, 1, 21, &length, &hlen):
        return False
    cdef const uint8_t* d = b + pos + 8
    cdef const uint8_t* e
    cdef int32_t rlen, elen, vlen
    cdef int klen, i, idx
    cdef bint wide
    cdef Field* slot
    for i in range(NF):
        h.v1[i].kind = 0
        h.v2[i].kind = 0
    h.code = (d[0] << 8) | d[1]
    if h.code & 0x8000:
        h.code -= 0x10000
    h.opaque = get32(d + 5)
    h.flag = get32(d + 9)
    rlen = get32(d + 13)
    if rlen < 0 or 17 + <Py_ssize_t>rlen + 4 > hlen or not header_utf8(d + 17, rlen, &wide):
        return False
    cdef Py_ssize_t p = 17 + rlen
    elen = get32(d + p)
    p += 4
    if elen < 0 or p + <Py_ssize_t>elen > hlen:
        return False
    cdef Py_ssize_t stop = p + elen
    while p < stop:
        if p + 2 > stop:
            return False
        klen = (d[p] << 8) | d[p + 1]
        p += 2
        if klen & 0x8000 or p + klen + 4 > stop:
            return False
        if not header_utf8(d + p, klen, &wide):
            return False
        slot = NULL
        if klen == 1 and 97 <= d[p] <= 110:
            slot = &h.v2[d[p] - 97]
        elif klen:
            idx = field_of_v1(d + p, klen)
            if idx >= 0:
                slot = &h.v1[idx]
        p += klen
        vlen = get32(d + p)
        p += 4
        if vlen < 0 or p + <Py_ssize_t>vlen > stop:
            return False
        if not header_utf8(d + p, vlen, &wide):
            return False
        if slot != NULL and vlen:  # an empty value is skipped: an earlier one stands
            slot.kind = JV_STR
            slot.s.s = d + p
            slot.s.n = vlen
            slot.s.esc = False
            slot.s.wide = wide
            slot.start = d + p
            slot.stop = d + p + vlen
        p += vlen
    return frame_done(h, d + hlen, pos, length, hlen, 1)


cdef inline bint read_head(const uint8_t* b, Py_ssize_t pos, Py_ssize_t end,
                           Py_ssize_t max_frame, Head* h) noexcept nogil:
    """The send request at ``b[pos:end]``, with either header."""
    if end - pos >= 8 and b[pos + 4] == 1:
        return parse_head_rmq(b, pos, end, max_frame, h)
    return parse_head(b, pos, end, max_frame, h)


cdef inline bint strict_int(Field* f, int64_t* out) noexcept nogil:
    """A plain number value (a string without escapes or an integer) into ``out``."""
    if f.kind == JV_STR:
        return not f.s.esc and ascii_int(<const char*>f.s.s, f.s.n, out)
    if f.kind == JV_INT:
        return ascii_int(<const char*>f.start, f.stop - f.start, out)
    return False


cdef inline bint plain_text(Field* f, const uint8_t** p, Py_ssize_t* n) noexcept nogil:
    """The ASCII text of a value without escapes (a string or an integer)."""
    if f.kind == JV_STR:
        # (``wide`` may be set for every string of a header with a byte >= 0x80)
        if f.s.esc or (f.s.wide and not is_ascii(f.s.s, f.s.n)):
            return False
        p[0] = f.s.s
        n[0] = f.s.n
        return True
    if f.kind == JV_INT:
        p[0] = f.start
        n[0] = f.stop - f.start
        return True
    return False


cdef inline int64_t now_ms() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


cdef inline Py_ssize_t* offsets_of(ClassOffsets fields, object o) except NULL:
    """Where ``fields``' names lie in ``o`` (> 0: its slot, read and set there
    at the cost of a load; else through its attribute, as for any other
    class), found again when ``o`` is of another class than the last met:
    the per-read fields of the broker and the store that ``open_read`` and
    ``close_read`` read and set, ~140 instructions each through the
    attribute protocol."""
    if type(o) is not fields.cls:
        fields.find(o)
    return fields.at


cdef class CTopic:
    """A topic the lane stores into, kept between reads; its settings are
    asked for again in every read that uses it (``read``)."""
    cdef bytes name_b
    cdef str name
    cdef int wq, rq
    cdef bint multi, ok, allowed
    cdef int32_t hash
    cdef list queues            # CQueue or None by queue id
    cdef dict cqs               # the store's consume queues of the topic, this read
    cdef long long read


cdef class CQueue:
    """A consume queue the lane stores into, kept between reads: checked
    against the store's tables in every read that uses it (``read``), its
    tail's position, queue offset and last physical offset reloaded when
    anything may have moved them since the lane last published them
    (``epoch``: ``SendLane.fill``), its tail file's buffer held for that read."""
    cdef object cq, cmf
    cdef tuple key              # (topic, queue id): the offset and held-pull tables' key
    cdef Py_buffer buf
    cdef bint held, ok
    cdef long long read, epoch
    cdef int64_t cpos, cfrom, csize, qoff, maxphy, nums, events, size, tags, store_ts
    cdef object each
    # the broker's put counts of the queue not yet folded into its statistics
    # (``SendLane.take_puts``); ``listed`` while the lane's ``counted`` holds it
    cdef int64_t pend_nums, pend_size, pend_events
    cdef bint listed

    cdef void release(self) noexcept:
        if self.held:
            PyBuffer_Release(&self.buf)
            self.held = False

    def __dealloc__(self):
        self.release()


cdef class Ctx:
    """A read's context in C fields (``SendLane.open_read``): the store's
    append session (``run``, its file ``mf``, its buffers and limits) and the
    broker's part (born host, message-id prefix, cluster, response tails,
    SYNC_FLUSH).  The lane keeps one and fills it again for each read."""
    cdef object run, mf, target, index
    cdef int64_t start, file_from, limit, max_body, slots, entries
    cdef bytes born, store_host, host_hex, cluster, tail, rtail
    cdef bint sync
    cdef bint counting          # the broker's put counts kept by the lane (SendLaneSupport.end)

    cdef void clear(self) noexcept:
        """Let go of the read's session and buffers once it is served."""
        self.run = self.mf = self.target = self.index = None


cdef class Out:
    """A growing byte buffer of response frames."""
    cdef uint8_t* data
    cdef Py_ssize_t n, cap

    def __dealloc__(self):
        PyMem_Free(self.data)

    cdef int reserve(self, Py_ssize_t more) except -1:
        cdef Py_ssize_t cap
        cdef uint8_t* d
        if self.n + more <= self.cap:
            return 0
        cap = max(self.cap * 2, self.n + more, 4096)
        d = <uint8_t*>PyMem_Realloc(self.data, cap)
        if d == NULL:
            raise MemoryError()
        self.data = d
        self.cap = cap
        return 0

    cdef object take(self):
        if self.n == 0:
            return None
        out = PyBytes_FromStringAndSize(<char*>self.data, self.n)
        self.n = 0
        return out


cdef class SendLane:
    """See the module docstring; same constructor and ``serve`` as the twin."""
    cdef readonly object support
    cdef Py_ssize_t max_frame
    cdef uint8_t* scratch       # unescaped properties, then the stored string
    cdef Py_ssize_t scratch_cap
    cdef long long counts[6]    # the last serve's requests: V1, V2, batch; each answered, oneway
    cdef bint index_full        # set by index_of
    cdef dict batch_props       # a batch's property text -> (stored batch-level string, wait)
    cdef dict topic_cache       # topic bytes -> CTopic
    cdef CTopic last_topic
    cdef long long read_id      # the read being served
    # the queues' tails as the lane last published them hold while nothing
    # else stored (``fill``): the store's end and last store time as this
    # lane's last read left them (end -1: unknown), and the count of the
    # times they did not (a queue loaded in another epoch is loaded again)
    cdef int64_t published_to, published_ts, open_ts
    cdef long long epoch
    # the read's tables (SendLaneSupport.begin): consume queues, queue offsets,
    # held pulls; dicts, so a queue's look-ups per read are C calls, not
    # method calls (the Java load meets a new queue with nearly every message)
    cdef dict cq_table, tq_table, hold_table
    # the broker's topic configs (SendLaneSupport.topics.table) of the read
    cdef dict topic_table
    cdef object run_obj         # the read's AppendRun (its ``queue`` for a queue met anew)
    cdef bint histograms
    cdef object bstats          # the broker's statistics (BrokerStats)
    cdef list counted           # CQueues with put counts not yet taken (take_puts)
    # the broker's cluster name and the store's message-id prefix as last
    # encoded (again only when they change)
    cdef str cluster_name, hex_of
    cdef bytes cluster_b, host_hex_b
    # one read's working objects, kept between reads (a read of one send then
    # makes no object of its own); ``busy`` while a read uses them
    cdef Ctx ctx
    cdef Out out, held
    cdef list touched
    cdef bint busy
    # the support's references, which it sets once (``SendLaneSupport.__init__``)
    # and never rebinds: taken here once, not as attributes in every read
    # (what they refer to -- configs, queues, flags -- is read in each read)
    cdef object s_store, s_cl, s_cfg, s_bc, s_queue, s_processor, s_topics, s_hold
    cdef object s_async_master, s_async_flush, s_sync_flush, s_runs_listener, s_counted_listener
    cdef object s_sync_master
    cdef object s_leader        # a DLedger group member's leader role (``leads``; None:
                                # a support of no group, never leading)
    cdef object s_walk_stats    # the counted listener's statistics and forms when it is
    cdef list s_walk_forms      # on_counted_runs bound to them (called in C: counted_walk)
    cdef int64_t s_not_writeable, s_zero_ahead
    # what the store, its commit log and the broker make once and never
    # rebind: the dispatch switches, running flags, both statistics
    cdef object s_multi, s_flags, s_sstats, s_bstats, s_clcfg
    cdef PutLocks s_locks       # the commit log's put lock and the reput lock (take_locks)
    # where the fields read and set in every read lie in their objects (offsets_of)
    cdef ClassOffsets f_queue, f_cl, f_bc, f_cfg, f_store, f_flags, f_checkpoint, f_mf, f_run
    cdef ClassOffsets f_stats, f_hold, f_channel, f_ix
    cdef ClassOffsets f_multi, f_ixfile, f_ixview, f_sup, f_topics  # (the bracket's too)
    cdef ClassOffsets f_cmf, f_cq  # (a queue's, as the read publishes it)
    cdef ClassOffsets f_tc  # (a topic's config, as a read looks it up: topic_of)
    cdef ClassOffsets f_ms

    def __init__(self, support, Py_ssize_t max_frame):
        self.support = support
        self.s_store = getattr(support, "store", None)
        self.s_cl = getattr(support, "cl", None)
        self.s_cfg = getattr(support, "cfg", None)
        self.s_bc = getattr(support, "bc", None)
        self.s_queue = getattr(support, "send_queue", None)
        self.s_processor = getattr(support, "processor", None)
        self.s_topics = getattr(support, "topics", None)
        self.s_hold = getattr(support, "hold", None)
        self.s_async_master = getattr(support, "async_master", None)
        self.s_sync_master = getattr(support, "sync_master", None)
        self.s_leader = getattr(support, "leader_role", None)
        self.s_async_flush = getattr(support, "async_flush", None)
        self.s_sync_flush = getattr(support, "sync_flush", None)
        self.s_runs_listener = getattr(support, "runs_listener", None)
        self.s_counted_listener = listener = getattr(support, "counted_runs_listener", None)
        if type(listener) is partial and listener.func is on_counted_runs and \
                not listener.keywords and len(listener.args) == 2 and \
                type(listener.args[1]) is list:
            self.s_walk_stats, self.s_walk_forms = listener.args
        self.s_not_writeable = getattr(support, "not_writeable", 0)
        self.s_zero_ahead = getattr(support, "zero_ahead", 0)
        self.s_multi = getattr(self.s_cl, "multi", None)
        put_lock = getattr(self.s_cl, "put_lock", None)
        self.s_clcfg = getattr(self.s_cl, "config", None)
        reput_lock = getattr(self.s_store, "_reput_lock", None)
        if put_lock is not None and reput_lock is not None:
            self.s_locks = PutLocks(put_lock, reput_lock)
        self.s_flags = getattr(self.s_store, "running_flags", None)
        self.s_sstats = getattr(self.s_store, "stats", None)
        self.s_bstats = getattr(getattr(support, "c", None), "stats", None)
        self.max_frame = max_frame
        self.published_to = -1
        self.batch_props = {}
        self.topic_cache = {}
        self.ctx = Ctx.__new__(Ctx)
        self.out = Out()
        self.held = Out()
        self.touched = []
        self.counted = []
        self.f_queue = ClassOffsets(("_waiting", "busy", "workers", "before_run_active"), True)
        self.f_cl = ClassOffsets(("begin_time_in_lock", "append_run", "zero_ahead_enabled",
                                  "topic_queue_table", "mfq", "file_size", "store_host_field",
                                  "msg_id_prefix"), True)
        self.f_bc = ClassOffsets(("startAcceptSendRequestTimeStamp", "brokerPermission",
                                  "regionId", "traceOn"), True)
        self.f_cfg = ClassOffsets(("brokerRole", "messageIndexEnable", "flushDiskType",
                                   "flushCommitLogTimed", "maxMessageSize"), True)
        self.f_store = ClassOffsets(("_shutdown", "commit_service", "reput_from_offset",
                                     "checkpoint", "consume_queue_table",
                                     "message_runs_listener", "index_service"), True)
        self.f_flags = ClassOffsets(("flag_bits",), True)
        self.f_checkpoint = ClassOffsets(("logics_msg_timestamp",), True)
        self.f_mf = ClassOffsets(("wrote_position", "file_from_offset", "zeroed_to", "view",
                                  "committed_position", "store_timestamp"), True)
        self.f_run = ClassOffsets(("mf", "buffer", "index", "_open"), True)
        self.f_stats = ClassOffsets(("put_total", "size_histograms"), True)
        self.f_hold = ClassOffsets(("table",), True)
        self.f_channel = ClassOffsets(("attrs",), True)
        self.f_multi = ClassOffsets(("enabled",), True)
        self.f_ixfile = ClassOffsets(("mf", "max_index"), True)
        self.f_ixview = ClassOffsets(("view",), True)  # (an index file's mapped file)
        self.f_sup = ClassOffsets(("served", "_tails_of", "_tail_pair"), True)
        self.f_topics = ClassOffsets(("table",), True)
        self.f_tc = ClassOffsets(("writeQueueNums", "readQueueNums", "topicFilterType"), True)
        self.f_ms = ClassOffsets(("role", "transferee"), True)  # (a DLedger member state's)
        self.f_cmf = ClassOffsets(("wrote_position", "committed_position"), True)
        self.f_cq = ClassOffsets(("max_physic_offset",), True)
        self.f_ix = ClassOffsets(("_unfinished", "files", "_spare", "max_slots", "max_index"),
                                 True)
        lanes = getattr(support, "lanes", None)
        if lanes is not None:  # SendLaneSupport.take_puts asks this lane's counts too
            lanes.append(self)

    def __dealloc__(self):
        PyMem_Free(self.scratch)

    cdef int room(self, Py_ssize_t need) except -1:
        cdef uint8_t* d
        if need > self.scratch_cap:
            d = <uint8_t*>PyMem_Realloc(self.scratch, need)
            if d == NULL:
                raise MemoryError()
            self.scratch = d
            self.scratch_cap = need
        return 0

    def serve(self, channel, buf, Py_ssize_t pos, Py_ssize_t end):
        """Serve the plain sends at the start of ``buf[pos:end]``: (position of
        the first frame left to the general path, response frames or None)."""
        cdef Py_buffer view
        cdef Head h
        memset(self.counts, 0, sizeof(self.counts))
        PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
        try:
            if pos < 0 or end > view.len or pos > end:
                raise ValueError("pos/end outside the buffer")
            if not read_head(<const uint8_t*>view.buf, pos, end, self.max_frame, &h):
                return pos, None
            if self.busy:  # a read served from within another's listeners: objects of its own
                ctx = Ctx.__new__(Ctx)
                if not self.open_read(channel, ctx):
                    return pos, None
                return self.run(channel, ctx, <const uint8_t*>view.buf, pos, end, &h, Out(),
                                Out(), [])
            if not self.open_read(channel, self.ctx):
                return pos, None
            self.busy = True
            try:
                return self.run(channel, self.ctx, <const uint8_t*>view.buf,
                                pos, end, &h, self.out, self.held, self.touched)
            finally:
                self.busy = False
                self.ctx.clear()
                del self.touched[:]
                self.out.n = self.held.n = 0  # (taken already, unless the read failed)
        finally:
            PyBuffer_Release(&view)

    cdef object run(self, channel, Ctx ctx, const uint8_t* b, Py_ssize_t pos, Py_ssize_t end,
                    Head* h, Out out, Out held, list touched):
        cdef Py_buffer tv, iv
        cdef bint t_held = False, i_held = False
        cdef int64_t wrote = ctx.start
        cdef int64_t start_wrote = wrote
        cdef int64_t store_ts = 0, wait_end = 0, counted = 0
        cdef CQueue q
        cdef int r
        support = self.support
        self.read_id += 1
        self.run_obj = ctx.run
        try:
            try:
                PyObject_GetBuffer(ctx.target, &tv, PyBUF_WRITABLE)
                t_held = True
                if ctx.index is not None:
                    PyObject_GetBuffer(ctx.index, &iv, PyBUF_WRITABLE)
                    i_held = True
                if ctx.limit > tv.len:
                    raise ValueError("commit-log buffer smaller than its file")
                while True:
                    r = self.one(channel, ctx, h, &tv, &iv if i_held else NULL, &wrote,
                                 &store_ts, &wait_end, touched, out, held)
                    if r == 0:
                        break
                    pos = h.frame_end
                    if not read_head(b, pos, end, self.max_frame, h):
                        break
            except Exception as exc:  # noqa: BLE001 - what is stored stays; the rest goes the general way
                support.failed(exc)
        finally:
            if i_held:
                PyBuffer_Release(&iv)
            if t_held:
                PyBuffer_Release(&tv)
            done = []  # the queues published, their runs made only if asked (close_read)
            queues_done = False
            try:
                for q in touched:
                    q.release()
                    if q.nums:
                        self.publish(q)
                        done.append(q)
                        if ctx.counting and q.each is None:  # SendLaneSupport.count_puts
                            counted += q.nums
                            q.pend_nums += q.nums
                            q.pend_size += q.size
                            q.pend_events += q.events
                            if not q.listed:
                                q.listed = True
                                self.counted.append(q)
                    else:
                        q.each = None
                queues_done = True
            finally:
                self.run_obj = None
                self.close_read(ctx, wrote, store_ts, done, channel, held.take(), wait_end,
                                counted, queues_done)
        return pos, out.take()

    cdef bint takes_sends(self) except -1:
        """``SendLaneSupport.accepting`` but for the page cache (asked by
        each caller in its own way): the send pool would run a send at once,
        start-up's send delay is over and the broker is writable."""
        cdef Py_ssize_t* f
        queue = self.s_queue
        if queue is not None:
            f = offsets_of(self.f_queue, queue)
            if slot_or_attr(queue, f[0], "_waiting") or \
                    slot_or_attr(queue, f[1], "busy") >= slot_or_attr(queue, f[2], "workers"):
                return False
            active = slot_or_attr(queue, f[3], "before_run_active")
            if active is not None and active():
                return False
        bc = self.s_bc
        f = offsets_of(self.f_bc, bc)
        return not (slot_or_attr(bc, f[0], "startAcceptSendRequestTimeStamp") or
                    not slot_or_attr(bc, f[1], "brokerPermission") & PERM_WRITE)

    cdef bint ascii_cluster(self) except -1:
        """The broker's cluster name is ASCII (the stored properties carry
        it), its bytes then kept in ``cluster_b``."""
        cluster = self.s_processor.cluster
        if cluster is not self.cluster_name:
            if not cluster.isascii():
                return False
            self.cluster_name = cluster
            self.cluster_b = cluster.encode()
        return True

    cdef bint open_read(self, channel, Ctx c) except -1:
        """``SendLaneSupport.begin`` (its twin, check for check) with the
        calls it makes inlined: whether the broker takes a send now, the
        store's append session opened (``open_run``: its checks, the locks,
        the zero fill ahead, the session armed) and the read's context in
        ``c``; False (nothing taken, no lock held) when sends must go the
        general way now.  One C call instead of about fifteen Python ones;
        the fields it reads and sets, at their slots (``offsets_of``)."""
        cdef Py_ssize_t* f
        sup = self.support
        # SendLaneSupport.accepting: the pool and the broker take sends ...
        if not self.takes_sends():
            return False
        store, cl, cfg = self.s_store, self.s_cl, self.s_cfg
        cdef Py_ssize_t* fs = offsets_of(self.f_store, store)
        cdef Py_ssize_t* fl = offsets_of(self.f_cl, cl)
        cdef Py_ssize_t* fc = offsets_of(self.f_cfg, cfg)
        # ... and the page cache is not busy (a put holds the lock: asked in full)
        began = slot_or_attr(cl, fl[0], "begin_time_in_lock")
        if began != 0 and store.is_os_page_cache_busy():
            return False
        if slot_or_attr(cfg, fc[0], "brokerRole") is not self.s_async_master or \
                slot_or_attr(self.s_multi, offsets_of(self.f_multi, self.s_multi)[0], "enabled"):
            return False
        if not self.ascii_cluster():
            return False
        # CommitLog.open_run
        run = slot_or_attr(cl, fl[1], "append_run")
        index_enabled = slot_or_attr(cfg, fc[1], "messageIndexEnable")
        if run is None:  # the session's first opening: made by the store's own code
            run = cl.open_run(index_enabled)
            if run is None:
                return False
            try:
                self.fill(c, sup, store, cl, cfg, channel, run, run.mf, run.buffer, run.index,
                          run.wrote, run.file_from, run.limit, run.max_body, run.slots,
                          run.entries, run.store_host, run.host_hex)
            except BaseException:
                run.release()
                raise
            return True
        flags = self.s_flags
        if slot_or_attr(store, fs[0], "_shutdown") or began or \
                slot_or_attr(store, fs[1], "commit_service") is not None or \
                slot_or_attr(flags, offsets_of(self.f_flags, flags)[0], "flag_bits") & \
                self.s_not_writeable:
            return False
        mf = direct_tail_of(slot_or_attr(cl, fl[4], "mfq"))
        if mf is None:
            return False
        cdef Py_ssize_t* fm = offsets_of(self.f_mf, mf)
        index = None
        cdef int64_t slots = 0, entries = 0, wrote, file_from
        if index_enabled:
            ix = slot_or_attr(store, fs[6], "index_service")
            ixf = self.index_file(ix)
            if ixf is None:
                return False
            f = offsets_of(self.f_ix, ix)
            index = self.file_view(ixf)
            slots = slot_or_attr(ix, f[3], "max_slots")
            entries = slot_or_attr(ix, f[4], "max_index")
        locks = self.s_locks
        if locks is None:
            raise TypeError("the send lane's support has no store locks")
        take_locks(locks)
        try:
            # (the file's position and offset, read once under the locks:
            # only their holder moves them, and zero_ahead leaves them)
            wrote = slot_or_attr(mf, fm[0], "wrote_position")
            file_from = slot_or_attr(mf, fm[1], "file_from_offset")
            if slot_or_attr(store, fs[2], "reput_from_offset") != file_from + wrote:
                give_locks(locks)
                return False
            if slot_or_attr(cl, fl[2], "zero_ahead_enabled") and \
                    slot_or_attr(mf, fm[2], "zeroed_to") - wrote < self.s_zero_ahead:
                cl.zero_ahead(mf)  # (it has zeros to write)
            # AppendRun.arm, of the run's fields those another reader may
            # take: the file and the buffers it holds (so a file's mapping is
            # never held past this read's) and ``_open`` (``release``).  The
            # positions and limits are this read's alone: they go into ``c``
            # (nothing reads them of the run before ``close_read``, and the
            # store's own users arm the run again).
            view = slot_or_attr(mf, fm[3], "view")  # (no write buffer: the mapping)
            f = offsets_of(self.f_run, run)
            set_slot_or_attr(run, f[0], "mf", mf)
            set_slot_or_attr(run, f[1], "buffer", view)
            set_slot_or_attr(run, f[2], "index", index)
            set_slot_or_attr(run, f[3], "_open", True)
            clcfg = self.s_clcfg
            self.fill(c, sup, store, cl, cfg, channel, run, mf, view, index, wrote,
                      file_from, slot_or_attr(cl, fl[5], "file_size") - 8,
                      slot_or_attr(clcfg, offsets_of(self.f_cfg, clcfg)[4], "maxMessageSize"),
                      slots, entries, slot_or_attr(cl, fl[6], "store_host_field"),
                      slot_or_attr(cl, fl[7], "msg_id_prefix"))
        except BaseException:
            if run._open:
                run.release()
            else:
                give_locks(locks)
            raise
        return True

    cdef object index_file(self, ix):
        """``IndexService.append_file``: the current index file when a
        session may write keys into it, else None; the file made ahead (a
        change of files) is left to the store's own code."""
        cdef int32_t used
        cdef Py_ssize_t* f = offsets_of(self.f_ix, ix)
        if slot_or_attr(ix, f[0], "_unfinished") is not None:
            return None
        files = slot_or_attr(ix, f[1], "files")
        if not files:
            return None
        last = files[len(files) - 1]
        if last is slot_or_attr(ix, f[2], "_spare"):
            return ix.append_file()
        used = index_count(self.file_view(last))
        return None if used >= <int64_t>slot_or_attr(
            last, offsets_of(self.f_ixfile, last)[1], "max_index") else last

    cdef object file_view(self, ixf):
        """An index file's ``mf.view`` (at their slots)."""
        mf = slot_or_attr(ixf, offsets_of(self.f_ixfile, ixf)[0], "mf")
        return slot_or_attr(mf, offsets_of(self.f_ixview, mf)[0], "view")

    cdef bytes born_of(self, channel):
        """The connection's stored born-host field (``SendLaneSupport.born_field``,
        made once per connection and kept in its ``attrs``)."""
        cdef dict attrs = slot_or_attr(channel, offsets_of(self.f_channel, channel)[0],
                                       "attrs")
        born = attrs.get("born_field")
        return self.support.born_field(channel) if born is None else born

    cdef tuple tails(self):
        """``SendLaneSupport.tails``: the kept (JSON, ROCKETMQ) answer tails,
        made again when the region or the trace switch moved."""
        sup = self.support
        bc = self.s_bc
        cdef Py_ssize_t* f = offsets_of(self.f_bc, bc)
        cdef Py_ssize_t* fp = offsets_of(self.f_sup, sup)
        made_for = slot_or_attr(sup, fp[1], "_tails_of")
        if slot_or_attr(bc, f[2], "regionId") is not made_for[0] or \
                slot_or_attr(bc, f[3], "traceOn") is not made_for[1]:
            return sup.new_tails()
        return slot_or_attr(sup, fp[2], "_tail_pair")

    cdef void fill(self, Ctx c, sup, store, cl, cfg, channel, run, mf, target, index,
                   int64_t wrote, int64_t file_from, int64_t limit, int64_t max_body,
                   int64_t slots, int64_t entries, bytes store_host, str host_hex) except *:
        """The read's context from the session just armed (``run``: its file,
        buffers, position and limits given) and the broker
        (``LaneContext.renew``'s fields)."""
        c.run = run
        c.mf = mf
        c.target = target
        c.index = index
        c.start = wrote
        c.file_from = file_from
        c.limit = limit
        c.max_body = max_body
        c.slots = slots
        c.entries = entries
        c.store_host = store_host
        if host_hex is not self.hex_of:
            self.hex_of = host_hex
            self.host_hex_b = host_hex.encode()
        c.host_hex = self.host_hex_b
        c.cluster = self.cluster_b
        c.born = self.born_of(channel)
        c.tail, c.rtail = self.tails()
        c.sync = slot_or_attr(cfg, offsets_of(self.f_cfg, cfg)[2], "flushDiskType") is \
            self.s_sync_flush
        # every consume-queue put goes through the commit log and moves the
        # store's end and last store time: while both are as this lane's last
        # read published them (and the tables are the same objects), the
        # queues' tails are as it left them; otherwise all are loaded anew
        cdef Py_ssize_t* fs = offsets_of(self.f_store, store)
        checkpoint = slot_or_attr(store, fs[3], "checkpoint")
        self.open_ts = slot_or_attr(checkpoint, offsets_of(self.f_checkpoint, checkpoint)[0],
                                    "logics_msg_timestamp")
        cq_table = slot_or_attr(store, fs[4], "consume_queue_table")
        tq_table = slot_or_attr(cl, offsets_of(self.f_cl, cl)[3], "topic_queue_table")
        if file_from + wrote != self.published_to or self.open_ts != self.published_ts or \
                cq_table is not self.cq_table or tq_table is not self.tq_table:
            self.epoch += 1
        self.published_to = -1  # (until this read publishes)
        self.cq_table = cq_table
        self.topic_table = self.topics_table()
        self.tq_table = tq_table
        hold = self.s_hold
        self.hold_table = None if hold is None else \
            slot_or_attr(hold, offsets_of(self.f_hold, hold)[0], "table")
        bstats = self.bstats = self.s_bstats
        self.histograms = \
            slot_or_attr(bstats, offsets_of(self.f_stats, bstats)[1],
                         "size_histograms") is not None
        listener = self.s_runs_listener
        c.counting = listener is not None and \
            slot_or_attr(store, fs[5], "message_runs_listener") is listener

    cdef void close_read(self, Ctx c, int64_t wrote, int64_t store_ts, list done, channel,
                         waiting, int64_t wait_end, int64_t counted,
                         bint queues_done) except *:
        """``SendLaneSupport.end`` (its twin): the session closed (the
        commit log's write position, the checkpoint's store time and the
        dispatch position published, then the locks released), then the
        statistics (``counted``: the messages of the runs counted on their
        queues, see ``SendLaneSupport.count_puts``), the arrival notices,
        the flush wake-up or waiter.  ``done``: the queues published with
        puts (their runs, ``RunQueue.summary``, are made only when a
        listener hears them); ``queues_done``: every touched queue
        published (its tail then holds for the next read, ``fill``)."""
        cdef Py_ssize_t* f
        sup = self.support
        run = c.run
        store = self.s_store
        cdef Py_ssize_t* fs = offsets_of(self.f_store, store)
        stored = wrote != c.start
        try:
            if stored:  # AppendRun.publish
                mf = c.mf
                f = offsets_of(self.f_mf, mf)
                at = wrote  # (one number object for the three)
                set_slot_or_attr(mf, f[0], "wrote_position", at)
                set_slot_or_attr(mf, f[4], "committed_position", at)
                set_slot_or_attr(mf, f[5], "store_timestamp", store_ts)
                checkpoint = slot_or_attr(store, fs[3], "checkpoint")
                set_slot_or_attr(checkpoint, offsets_of(self.f_checkpoint, checkpoint)[0],
                                 "logics_msg_timestamp", store_ts)
                set_slot_or_attr(store, fs[2], "reput_from_offset", c.file_from + wrote)
                if queues_done:
                    self.published_to, self.published_ts = c.file_from + wrote, store_ts
            elif queues_done:
                self.published_to, self.published_ts = c.file_from + wrote, self.open_ts
        finally:  # AppendRun.release
            f = offsets_of(self.f_run, run)
            if slot_or_attr(run, f[3], "_open"):
                set_slot_or_attr(run, f[3], "_open", False)
                give_locks(self.s_locks)
        if not stored:
            return
        cdef CQueue q
        cdef int64_t nums = 0, size = 0, events = 0
        cdef bint one_topic = True, listed = False
        topic = None
        for q in done:  # (read before any Python runs: a read it serves reuses the queues)
            listed |= q.each is not None
            if topic is None:
                topic = q.key[0]
            elif one_topic and q.key[0] is not topic and q.key[0] != topic:
                one_topic = False
            nums += q.nums
            size += q.size
            events += q.events
        runs_listener = slot_or_attr(store, fs[5], "message_runs_listener")
        walks = c.counting and self.s_walk_forms is not None  # (counted_walk)
        runs = None
        if not walks or listed or not one_topic:
            runs = [self.summary(q) for q in done]
        if listed:
            for q in done:
                q.each = None
        f = offsets_of(self.f_sup, sup)
        if one_topic:  # (put_counts' first case, from the queues)
            nums = self.count_store(topic, nums, size, events)
        else:
            nums = c_put_counts(self.s_sstats, runs)
        set_slot_or_attr(sup, f[0], "served", slot_or_attr(sup, f[0], "served") + nums)
        if c.counting:
            if counted:
                bstats = self.bstats
                f = offsets_of(self.f_stats, bstats)
                set_slot_or_attr(bstats, f[0], "put_total",
                                 slot_or_attr(bstats, f[0], "put_total") + counted)
            runs_listener = self.s_counted_listener
        if walks:
            try:
                # one topic's runs that list no puts: the walk does nothing
                # with them but hand them to its forms, so they are made only
                # when one of those would hear them (lane_runs.forms_want)
                if runs is None and forms_want(self.s_walk_forms, topic):
                    runs = [self.summary(q) for q in done]
                if runs is not None:
                    counted_walk(self.s_walk_stats, self.s_walk_forms, runs)
            except Exception:  # noqa: BLE001 - a listener bug must not fail stored sends
                sup.listener_failed()
        elif runs_listener is not None:
            try:
                runs_listener(runs)
            except Exception:  # noqa: BLE001 - a listener bug must not fail stored sends
                sup.listener_failed()
        else:
            sup.notify_each(runs)
        cfg = self.s_cfg
        f = offsets_of(self.f_cfg, cfg)
        if slot_or_attr(cfg, f[2], "flushDiskType") is self.s_async_flush:
            if not slot_or_attr(cfg, f[3], "flushCommitLogTimed"):
                store.flush_service.wake_for(c.file_from + wrote, store_ts)
        else:
            sup.wait_flush(channel, waiting, wait_end)

    cdef int64_t count_store(self, topic, int64_t nums, int64_t size,
                             int64_t events) except -1:
        """The store's statistics of a read's runs of one ``topic`` (None:
        no runs), as ``put_counts`` counts them: the messages."""
        if topic is None:
            return 0
        stats = self.s_sstats
        cdef PutCounters counters = counters_of(stats)
        if counters is not None:
            counters.count_puts(topic, nums, size, events)
        else:
            stats.on_puts(topic, nums, size, events)
        return nums

    cdef tuple summary(self, CQueue q):
        """The run ``SendLaneSupport.end`` notifies of (``RunQueue.summary``)
        of a queue the read published."""
        return (q.key[0], q.key[1], q.qoff, q.tags, q.store_ts, q.nums, q.size, q.events, q.each)

    cdef void publish(self, CQueue q) except *:
        """Bring a queue's tail and offset up to date while the append session
        is open (under its locks), as ``AppendRun.publish_queue`` does for the
        twin."""
        self.tq_table[q.key] = q.qoff
        cmf = q.cmf
        cdef object cpos = q.cpos  # (one number object for both)
        cdef Py_ssize_t* f = offsets_of(self.f_cmf, cmf)
        set_slot_or_attr(cmf, f[0], "wrote_position", cpos)
        set_slot_or_attr(cmf, f[1], "committed_position", cpos)
        cq = q.cq
        set_slot_or_attr(cq, offsets_of(self.f_cq, cq)[0], "max_physic_offset", q.maxphy)

    def take_puts(self, stats):
        """Hand the put counts kept on the queues since the last call to the
        broker's statistics (``SendLaneSupport.take_puts``, at each fold).
        Each queue's counters are read and zeroed before the statistics are
        called, so a read served meanwhile counts into them again."""
        cdef list queues = self.counted
        cdef CQueue q
        cdef int64_t nums, size, events
        if not queues:
            return
        self.counted = []
        for q in queues:
            nums, size, events = q.pend_nums, q.pend_size, q.pend_events
            q.pend_nums = q.pend_size = q.pend_events = 0
            q.listed = False
            if events:
                stats.add_pending_put(q.key[0], q.key[1], nums, size, events)

    def plain_sends(self, bytes cluster not None, buf, Py_ssize_t pos, Py_ssize_t end):
        """The plain single sends at the start of ``buf[pos:end]`` as
        ``store_read`` reads them (``plain_read``), each as the twin's
        ``plain_sends`` gives it: (frame end, code, flag, opaque, serialize
        type, topic, queue id, sysFlag without the host bits (MULTI_TAGS set
        for such a topic), born timestamp, flag, reconsume times, body,
        stored properties, index keys), up to the first frame the lane
        leaves to the general path (a batch included); ``cluster`` is the
        broker's cluster name, as the stored properties carry it."""
        cdef Py_buffer view
        cdef Plain* sends = NULL
        cdef Py_ssize_t i, n
        cdef Plain* p
        cdef Out props = Out()
        PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
        try:
            n = self.plain_read(&sends, props, [], cluster, &view, pos, end)
            set_props(sends, n, props)
            out = []
            for i in range(n):
                p = &sends[i]
                out.append((p.frame_end, p.code, p.flag, p.opaque, p.stype, <object>p.topic,
                            p.qid, p.sys_flag, p.born_ts, p.mflag, p.reconsume,
                            PyBytes_FromStringAndSize(<const char*>p.body, p.body_len),
                            PyBytes_FromStringAndSize(<const char*>p.props, p.props_len),
                            p.nkeys))
            return out
        finally:
            PyMem_Free(sends)
            PyBuffer_Release(&view)

    def store_read(self, bytes cluster not None, buf, Py_ssize_t pos, Py_ssize_t end, cl,
                   int32_t host_bits, bytes born not None, int64_t now, bytes host_hex not None,
                   tuple tails not None, dict sizes not None, dict counts not None):
        """A DLedger leader's lane's read in one call: its leading plain
        sends read (``plain_read``: into a C array, no Python object per
        send), and while the broker ``leads``, stored by the commit log
        ``cl`` (``c_append_plain``, the compiled
        ``DLedgerCommitLog.append_plain``: each body copied once, into its
        entry; ``born`` the stored born-host field, ``host_bits`` its sysFlag
        bits, ``now`` the store timestamp), counted (``tally_puts``) and
        answered (``answer_puts``: ``host_hex`` the message ids' host part,
        ``tails`` the JSON and the ROCKETMQ header tails).  Returns (sends
        stored, the end of the last one's frame, the first and last entry,
        the answers joined, the answered sends' (opaque, serialize type)
        packed as ``ANSWERED``).  The twin of
        ``rmq.broker.dledger_lane._store_read``."""
        return self.read_stored(cluster, buf, pos, end, cl, host_bits, born, now, host_hex,
                                tails, sizes, counts)

    cdef tuple read_stored(self, bytes cluster, buf, Py_ssize_t pos, Py_ssize_t end, cl,
                           int32_t host_bits, bytes born, int64_t now, bytes host_hex,
                           tuple tails, dict sizes, dict counts):
        """``store_read``'s steps (called straight by ``DLedgerLane.serve``)."""
        cdef Py_buffer view
        cdef Plain* sends = NULL
        cdef Py_ssize_t n, ns
        cdef Put* puts = NULL
        cdef Out props = Out()
        cdef list topics = []
        if len(tails) != 2 or type(tails[0]) is not bytes or type(tails[1]) is not bytes:
            raise TypeError("tails: the JSON and the ROCKETMQ tail, bytes")
        PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
        try:
            n = self.plain_read(&sends, props, topics, cluster, &view, pos, end)
            if n == 0 or not self.leads():
                return 0, pos, None, None, b"", b""
            set_props(sends, n, props)
            puts = <Put*>PyMem_Malloc(n * sizeof(Put))
            if puts == NULL:
                raise MemoryError()
            entries = c_append_plain(cl, sends, n, host_bits, born, now, puts)
            ns = len(entries)
            if ns == 0:
                return 0, pos, None, None, b"", b""
            tally_puts(sends, puts, ns, sizes, counts)
            answers, answered = answer_puts(host_hex, tails, sends, puts, ns)
            return ns, sends[ns - 1].frame_end, entries[0], entries[ns - 1], answers, answered
        finally:
            PyMem_Free(puts)
            PyMem_Free(sends)
            PyBuffer_Release(&view)

    cdef Py_ssize_t plain_read(self, Plain** sends, Out props, list topics, bytes cluster,
                               Py_buffer* view, Py_ssize_t pos, Py_ssize_t end) except -1:
        """The plain single sends at the start of ``view[pos:end]`` into
        ``sends[0]`` (made here, freed by the caller), each read as ``serve``
        reads it, with the same checks, up to the first frame the lane
        leaves to the general path (a batch included): how many.  Their
        stored properties are written one after the other into ``props``
        (placed by ``set_props`` once all are read), their topics held in
        ``topics``.  One call a read (each topic's settings asked for once
        in it)."""
        cdef Py_ssize_t n = 0, cap = 16
        cdef Plain* grown
        if pos < 0 or end > view.len or pos > end:
            raise ValueError("pos/end outside the buffer")
        self.read_id += 1
        self.topic_table = self.topics_table()
        sends[0] = <Plain*>PyMem_Malloc(cap * sizeof(Plain))
        if sends[0] == NULL:
            raise MemoryError()
        while True:
            if n == cap:
                cap *= 2
                grown = <Plain*>PyMem_Realloc(sends[0], cap * sizeof(Plain))
                if grown == NULL:
                    raise MemoryError()
                sends[0] = grown
            if not self.plain_one(<const uint8_t*>view.buf, pos, end, cluster, props, topics,
                                  &sends[0][n]):
                return n
            pos = sends[0][n].frame_end
            n += 1

    cdef bint plain_one(self, const uint8_t* b, Py_ssize_t pos, Py_ssize_t end, bytes cluster,
                        Out props, list topics, Plain* p) except -1:
        """``plain_read``'s reading of the frame at ``b[pos:end]`` into
        ``p`` (its stored properties appended to ``props``, placed later by
        ``set_props``); False when the lane leaves it to the general
        path."""
        cdef Head h
        cdef SendFields s
        cdef SendProps sp
        cdef CTopic t
        cdef Py_ssize_t clen = PyBytes_GET_SIZE(cluster)
        cdef Py_ssize_t n, plen
        if not read_head(b, pos, end, self.max_frame, &h) or h.code == SEND_BATCH:
            return False
        t = self.fields(&h, &s)
        if t is None:
            return False
        n = self.props_text(s.props, 0)
        if n < 0:
            return False
        props.reserve(n + clen + 16)
        plen = send_props(<const char*>self.scratch, n, PyBytes_AS_STRING(cluster), clen,
                          <char*>props.data + props.n, &sp)
        if plen < 0 or sp.special or plen > MAX_PROPS:
            return False
        p.props_len = plen
        p.nkeys = (1 if sp.uniq_at >= 0 else 0) + \
            (count_keys(self.scratch + sp.keys_at, sp.keys_len) if sp.keys_at >= 0 else 0)
        props.n += plen
        if not topics or topics[len(topics) - 1] is not t:
            topics.append(t)  # (held while the read's sends borrow its name)
        p.topic = <PyObject*>t.name
        p.topic_b = <PyObject*>t.name_b
        p.body = h.body
        p.body_len = h.body_len
        p.props = NULL
        p.qid = <int32_t>s.qid
        p.mflag = <int32_t>s.mflag
        p.sys_flag = <int32_t>((s.sys_flag & ~0x30) | (MULTI_TAGS_FLAG if t.multi else 0))
        p.reconsume = <int32_t>s.reconsume
        p.born_ts = s.born_ts
        p.code, p.flag, p.opaque, p.stype = h.code, h.flag, h.opaque, h.stype
        p.frame_end = h.frame_end
        return True

    def leads(self):
        """``SendLane.leads`` (its twin, check for check): for a DLedger
        leader's lane, whether a send taken now would be stored, not
        refused -- ``SendLaneSupport.accepting``, a SYNC_MASTER's role, the
        store's ``accepts_puts``, no put in the lock, the group's leader not
        handing over, an ASCII cluster name -- with the fields read at their
        slots (``offsets_of``) rather than through about eight Python calls
        (the member state's role compared with the support's
        ``leader_role``, not asked of its ``is_leader``)."""
        if not self.takes_sends():
            return False
        store, cl, cfg, flags = self.s_store, self.s_cl, self.s_cfg, self.s_flags
        # a put in the lock refuses the read (the page cache can be busy only then)
        if slot_or_attr(cl, offsets_of(self.f_cl, cl)[0], "begin_time_in_lock"):
            return False
        # (the store's config is ``cfg``: a SYNC_MASTER's is not a slave's)
        if slot_or_attr(cfg, offsets_of(self.f_cfg, cfg)[0], "brokerRole") is not \
                self.s_sync_master:
            return False
        if slot_or_attr(store, offsets_of(self.f_store, store)[0], "_shutdown") or \
                slot_or_attr(flags, offsets_of(self.f_flags, flags)[0], "flag_bits") & \
                self.s_not_writeable:
            return False
        ms = cl.server.member_state
        cdef Py_ssize_t* fm = offsets_of(self.f_ms, ms)
        if slot_or_attr(ms, fm[0], "role") is not self.s_leader or \
                slot_or_attr(ms, fm[1], "transferee") is not None:
            return False
        return self.ascii_cluster()

    def served(self):
        """(request code, oneway, count) of what the last ``serve`` took."""
        return [((SEND_V1, SEND_V2, SEND_BATCH)[i >> 1], bool(i & 1), self.counts[i])
                for i in range(6) if self.counts[i]]

    cdef dict topics_table(self):
        """The broker's topic configs (``SendLaneSupport.topics.table``), read
        once per read: ``topic_of`` looks a read's topics up in them itself
        rather than asking the support's ``topic`` (a Python call per topic
        per read, ~1 % of a DLedger leader's loop)."""
        topics = self.s_topics
        return slot_or_attr(topics, offsets_of(self.f_topics, topics)[0], "table")

    cdef CTopic topic_of(self, const uint8_t* p, Py_ssize_t n):
        """The topic ``p[:n]`` as the lane keeps it, its settings asked for
        once per read; None when the lane does not store into it now."""
        cdef CTopic t = self.last_topic
        cdef Py_ssize_t* f
        if t is None or PyBytes_GET_SIZE(t.name_b) != n or \
                memcmp(PyBytes_AS_STRING(t.name_b), p, n) != 0:
            key = PyBytes_FromStringAndSize(<const char*>p, n)
            t = self.topic_cache.get(key)
            if t is None:
                if len(self.topic_cache) >= 4096:
                    self.topic_cache.clear()
                t = CTopic()
                t.name_b = key
                t.name = PyUnicode_New(n, 127)
                memcpy(PyUnicode_DATA(t.name), p, n)
                t.hash = ascii_hash(0, p, n)
                # the lane never stores into a retry topic or a system topic sends may not use
                t.allowed = not t.name.startswith(RETRY_GROUP_TOPIC_PREFIX) and \
                    t.name not in NOT_ALLOWED_SEND_TOPICS
                t.queues = []
                self.topic_cache[key] = t
            self.last_topic = t
        if t.read != self.read_id:  # SendLaneSupport.topic (its twin), inlined
            t.read = self.read_id
            t.ok = False
            if t.allowed:
                tc = self.topic_table.get(t.name)
                if tc is not None:  # (a TopicConfig's fields at their slots)
                    f = offsets_of(self.f_tc, tc)
                    t.wq = slot_or_attr(tc, f[0], "writeQueueNums")
                    t.rq = slot_or_attr(tc, f[1], "readQueueNums")
                    t.multi = slot_or_attr(tc, f[2], "topicFilterType") == MULTI_TAG
                    t.ok = True
                    t.cqs = self.cq_table.get(t.name) if self.cq_table is not None else None
        return t if t.ok else None

    cdef CQueue queue_of(self, CTopic t, int qid, list touched):
        """A queue the read stores into, checked against the store's tables
        and its tail reloaded once per read (the general path may have moved
        it since); None when the lane does not store into it now."""
        while len(t.queues) <= qid:
            t.queues.append(None)
        cdef CQueue q = t.queues[qid]
        cdef dict hold
        if q is None:
            q = CQueue()
            q.key = (t.name, qid)
            t.queues[qid] = q
        elif q.read == self.read_id:
            return q if q.ok else None
        q.read = self.read_id
        q.ok = False
        cdef dict qs = t.cqs
        # (by the key's own number object: no new one for a queue id past 256)
        current = qs.get(q.key[1]) if qs is not None else None
        # (in the epoch the queue was checked in, its tail file is still the
        # one it was: only a put or the store's recovery changes it)
        if current is None or current is not q.cq or q.epoch != self.epoch and (
                current.tail_file is not q.cmf or current.ext is not None):
            hold = self.hold_table  # SendLaneSupport.queue: listed one by one when watched
            lq = self.run_obj.queue(t.name, qid,
                                    self.histograms or bool(hold is not None and q.key in hold))
            if lq is None:
                return None
            q.cq, q.cmf = lq.cq, lq.cmf
            q.cfrom, q.csize = lq.cmf.file_from_offset, lq.cq.file_size  # fixed per file
            q.epoch = 0
            # the offset table's entry of the queue keyed by the queue's own key
            # object from now on: the lane's look-ups and updates (every read
            # that stores into it) then find it by identity, not by comparing
            # two tuples (the table's order does not matter)
            qoff = self.tq_table.pop(q.key, None)
            if qoff is not None:
                self.tq_table[q.key] = qoff
        cmf = q.cmf
        cdef Py_ssize_t* fm = offsets_of(self.f_mf, cmf)  # (a MappedFile's slots, read directly)
        if q.epoch != self.epoch:  # (else as this lane published them)
            q.cpos = slot_or_attr(cmf, fm[0], "wrote_position")
            q.qoff = self.tq_table.get(q.key, 0)
            q.maxphy = q.cq.max_physic_offset
            q.epoch = self.epoch
        hold = self.hold_table  # (no key hashed while no pull is held)
        q.each = [] if self.histograms or (hold is not None and hold and q.key in hold) else None
        PyObject_GetBuffer(slot_or_attr(cmf, fm[3], "view"), &q.buf, PyBUF_WRITABLE)
        q.held = True
        if q.cpos + CQ_UNIT <= q.buf.len:  # the entry's line, fetched while the record is written
            prefetch_w(<uint8_t*>q.buf.buf + q.cpos)
        q.nums = q.events = q.size = q.tags = q.store_ts = 0
        q.ok = True
        touched.append(q)
        return q

    cdef CTopic fields(self, Head* h, SendFields* s):
        """The header's numbers and topic (into ``s``) and the topic's view, or
        None when the general path decides (a field missing or not a plain
        number, a transaction, a negative or invalid queue, a topic the lane
        does not store into)."""
        cdef Field* f = &h.v1[0]
        if h.code != SEND_V1:
            f = &h.v2[0]
        cdef int64_t nums[5]
        cdef int i
        s.reconsume = 0
        if f[0].kind == 0 or f[1].kind == 0 or f[2].kind == 0:
            return None
        for i in range(5):
            if not strict_int(&f[3 + i], &nums[i]) or (i != 3 and not java_int(nums[i])):
                return None
        if f[9].kind and (not strict_int(&f[9], &s.reconsume) or not java_int(s.reconsume)):
            return None
        s.qid, s.sys_flag, s.born_ts, s.mflag = nums[1], nums[2], nums[3], nums[4]
        s.props = &f[8]
        if s.qid < 0 or s.sys_flag & TX_BITS:
            return None
        if not plain_text(&f[1], &s.tp, &s.tlen) or s.tlen == 0 or s.tlen > MAX_TOPIC:
            return None
        cdef CTopic t = self.topic_of(s.tp, s.tlen)
        if t is None or (s.qid >= t.wq and s.qid >= t.rq):
            return None
        return t

    cdef Py_ssize_t props_text(self, Field* f, Py_ssize_t extra) except -2:
        """The properties' text, unescaped, at the start of the scratch buffer
        (with ``extra`` bytes of room after it); its length, or -1 when it does
        not decode or is not well-formed UTF-8 (the general path answers)."""
        cdef Py_ssize_t n = 0
        cdef bint wide = False
        cdef const uint8_t* text
        if f.kind == JV_STR:
            self.room(f.s.n + extra)
            if f.s.esc:
                n = json_unescape(f.s.s, f.s.n, self.scratch, &wide)
                if n < 0:
                    return -1
            else:
                n = f.s.n
                memcpy(self.scratch, f.s.s, n)
                wide = f.s.wide and not is_ascii(self.scratch, n)
            return -1 if wide and not json_utf8_valid(self.scratch, n) else n
        if f.kind != 0:
            if not plain_text(f, &text, &n):
                return -1
            self.room(n + extra)
            memcpy(self.scratch, text, n)
            return n
        self.room(extra)
        return 0

    cdef int32_t sys_flag_of(self, Ctx ctx, SendFields* s, CTopic t) noexcept:
        """sysFlag as stored: the host-kind bits of the born and store hosts,
        MULTI_TAGS for a topic filtered that way."""
        cdef int64_t flag = (s.sys_flag & ~0x30) | \
            (0x10 if PyBytes_GET_SIZE(ctx.born) == 20 else 0) | \
            (0x20 if PyBytes_GET_SIZE(ctx.store_host) == 20 else 0)
        if t.multi:
            flag |= MULTI_TAGS_FLAG
        return <int32_t>flag

    cdef uint8_t* index_of(self, Py_buffer* iv, Ctx ctx, Py_ssize_t nkeys) except? NULL:
        """The index buffer (NULL with indexing off); ``index_full`` says
        whether ``nkeys`` more entries would not fit into it."""
        cdef int64_t slots = ctx.slots, entries = ctx.entries
        cdef int32_t used
        if iv == NULL:
            return NULL
        if iv.len < 40 + slots * 4 + entries * 20:
            raise ValueError("index buffer smaller than its layout")
        used = get32(<uint8_t*>iv.buf + 36)
        self.index_full = (used if used > 0 else 1) + nkeys > entries
        return <uint8_t*>iv.buf

    cdef int one(self, channel, Ctx ctx, Head* h, Py_buffer* tv, Py_buffer* iv,
                 int64_t* wrote, int64_t* store_ts, int64_t* wait_end,
                 list touched, Out out, Out held) except -1:
        """Store and answer the send in ``h``: 1, or 0 (nothing done) to leave
        it to the general path."""
        if h.code == SEND_BATCH:
            return self.one_batch(channel, ctx, h, tv, iv, wrote, store_ts, wait_end, touched,
                                  out, held)
        cdef SendFields s
        cdef CTopic t = self.fields(h, &s)
        if t is None:
            return 0
        # the properties, unescaped, then the stored string after them
        cdef bytes cluster = ctx.cluster
        cdef Py_ssize_t clen = PyBytes_GET_SIZE(cluster)
        cdef Py_ssize_t plen
        cdef SendProps sp
        cdef Py_ssize_t n = self.props_text(s.props, s.props.s.n + clen + 16
                                            if s.props.kind == JV_STR else 64 + clen)
        if n < 0:
            return 0
        self.room(2 * n + clen + 16)
        cdef const uint8_t* text = self.scratch
        cdef uint8_t* stored = self.scratch + n
        plen = send_props(<const char*>text, n, PyBytes_AS_STRING(cluster), clen,
                          <char*>stored, &sp)
        if plen < 0 or sp.special or plen > MAX_PROPS:
            return 0
        cdef CQueue q = self.queue_of(t, <int>s.qid, touched)
        if q is None:
            return 0
        # the record's place and size
        cdef int32_t sys_flag = self.sys_flag_of(ctx, &s, t)
        cdef int64_t max_body = ctx.max_body
        cdef Py_ssize_t size = c_record_size(sys_flag, h.body_len, s.tlen, plen)
        cdef int64_t file_from = ctx.file_from
        cdef int64_t phy = file_from + wrote[0]
        if h.body_len > max_body or size > max_body + 65536 or wrote[0] + size > ctx.limit:
            return 0
        if q.cpos >= q.csize or q.cpos + CQ_UNIT > q.buf.len or \
                q.cfrom + q.cpos != q.qoff * CQ_UNIT or phy < q.maxphy:
            return 0
        cdef Py_ssize_t nkeys = (1 if sp.uniq_at >= 0 else 0) + \
            (count_keys(text + sp.keys_at, sp.keys_len) if sp.keys_at >= 0 else 0)
        cdef uint8_t* ix = self.index_of(iv, ctx, nkeys)
        if ix != NULL and self.index_full:
            return 0
        # everything that can fail is done before the first byte is written
        cdef bytes host_hex = ctx.host_hex
        cdef bytes tail = ctx.rtail if h.stype else ctx.tail
        cdef bint answer = not h.flag & RPC_ONEWAY
        cdef bint wait = ctx.sync and sp.wait
        cdef Out dest = held if wait else out
        if answer:
            dest.reserve(RESPONSE_ROOM + PyBytes_GET_SIZE(host_hex) + PyBytes_GET_SIZE(tail))
        cdef int64_t now = now_ms()
        if q.each is not None:
            q.each.append((q.qoff + 1, sp.tags_code, now, 1, size))
        c_write_record(<uint8_t*>tv.buf + wrote[0], <int32_t>s.qid, <int32_t>s.mflag, q.qoff,
                       phy, sys_flag, s.born_ts, <const uint8_t*>PyBytes_AS_STRING(ctx.born),
                       PyBytes_GET_SIZE(ctx.born), now,
                       <const uint8_t*>PyBytes_AS_STRING(ctx.store_host), PyBytes_GET_SIZE(ctx.store_host),
                       <int32_t>s.reconsume, 0, h.body, h.body_len, s.tp, s.tlen, stored, plen)
        cdef uint8_t* e = <uint8_t*>q.buf.buf + q.cpos
        put64(e, phy)
        put32(e + 8, <int32_t>size)
        put64(e + 12, sp.tags_code)
        if ix != NULL and nkeys and phy >= get64(ix + 24):
            index_keys(ix, ctx.slots, ctx.entries, t.hash, text, &sp, phy, now)
        wrote[0] += size
        q.cpos += CQ_UNIT
        q.qoff += 1
        q.maxphy = phy + size
        q.nums += 1
        q.events += 1
        q.size += size
        q.tags = sp.tags_code
        q.store_ts = store_ts[0] = now
        if answer:
            p = respond_head(dest, host_hex, h.stype)
            put_hex16(p, phy)
            respond_tail(dest, p + 16, s.qid, q.qoff - 1, h.opaque, tail, h.stype)
            if wait:
                wait_end[0] = file_from + wrote[0]
        self.counts[(2 if h.code == SEND_V2 else 0) + (0 if answer else 1)] += 1
        return 1

    cdef int one_batch(self, channel, Ctx ctx, Head* h, Py_buffer* tv, Py_buffer* iv,
                       int64_t* wrote, int64_t* store_ts, int64_t* wait_end,
                       list touched, Out out, Out held) except -1:
        """SEND_BATCH_MESSAGE: every inner message stored as its own record
        (store_batch's two passes), the comma-joined message ids answered;
        1, or 0 (nothing done) to leave it to the general path."""
        cdef SendFields s
        cdef CTopic t = self.fields(h, &s)
        if t is None:
            return 0
        cdef Py_ssize_t n = self.props_text(s.props, 0)
        if n < 0:
            return 0
        key = PyBytes_FromStringAndSize(<const char*>self.scratch, n)
        found = self.batch_props.get(key)
        if found is None:
            found = self.support.batch_properties(key.decode())
            if len(self.batch_props) > 1000:
                self.batch_props.clear()
            self.batch_props[key] = found
        cdef bytes props = found[0]
        cdef bint wait_flag = found[1]
        cdef const uint8_t* bp = <const uint8_t*>PyBytes_AS_STRING(props)
        cdef Py_ssize_t bpl = PyBytes_GET_SIZE(props)
        cdef CQueue q = self.queue_of(t, <int>s.qid, touched)
        if q is None:
            return 0
        cdef int32_t sys_flag = self.sys_flag_of(ctx, &s, t)
        cdef Props kept[KEPT]
        cdef Py_ssize_t count = 0, nkeys = 0
        cdef Py_ssize_t total = check_wire(h.body, h.body_len, sys_flag, s.tlen, bp, bpl,
                                           &count, &nkeys, kept)
        cdef int64_t file_from = ctx.file_from
        cdef int64_t phy = file_from + wrote[0]
        if total < 0 or count == 0 or wrote[0] + total > ctx.limit:
            return 0
        if q.cpos >= q.csize or q.cpos + count * CQ_UNIT > q.buf.len or \
                q.cfrom + q.cpos != q.qoff * CQ_UNIT or phy < q.maxphy:
            return 0
        cdef uint8_t* ix = self.index_of(iv, ctx, nkeys)
        if ix != NULL and nkeys and self.index_full:
            return 0
        # everything that can fail is done before the first byte is written
        cdef bytes host_hex = ctx.host_hex
        cdef bytes tail = ctx.rtail if h.stype else ctx.tail
        cdef Py_ssize_t hl = PyBytes_GET_SIZE(host_hex)
        cdef Py_ssize_t ids_len = count * (hl + 17) - 1
        cdef bint answer = not h.flag & RPC_ONEWAY
        cdef bint wait = ctx.sync and wait_flag
        cdef Out dest = held if wait else out
        cdef uint8_t* ids
        if answer:
            dest.reserve(RESPONSE_ROOM + ids_len + PyBytes_GET_SIZE(tail))
            ids = respond_head(dest, None, h.stype)
        else:
            self.room(ids_len + 1)
            ids = self.scratch
        cdef int64_t now = now_ms()
        if q.each is not None:
            q.each.append(None)  # filled in below: the append may fail, the writes may not
        memcpy(ids, PyBytes_AS_STRING(host_hex), hl)
        cdef int32_t last_tags = 0
        write_all(<uint8_t*>tv.buf + wrote[0], h.body, h.body_len, <int32_t>s.qid, sys_flag,
                  s.born_ts, <const uint8_t*>PyBytes_AS_STRING(ctx.born), PyBytes_GET_SIZE(ctx.born),
                  now, <const uint8_t*>PyBytes_AS_STRING(ctx.store_host), PyBytes_GET_SIZE(ctx.store_host),
                  <int32_t>s.reconsume, s.tp, s.tlen, bp, bpl, q.qoff, phy,
                  <uint8_t*>q.buf.buf + q.cpos, ix, ctx.slots, ctx.entries, <char*>ids, hl,
                  &last_tags, kept)
        wrote[0] += total
        q.cpos += count * CQ_UNIT
        q.qoff += count
        q.maxphy = phy + total
        q.nums += count
        q.events += 1
        q.size += total
        q.tags = last_tags
        q.store_ts = store_ts[0] = now
        if q.each is not None:  # (no negative index: wraparound is off)
            q.each[len(q.each) - 1] = (q.qoff, last_tags, now, count, total)
        if answer:
            respond_tail(dest, ids + ids_len, s.qid, q.qoff - count, h.opaque, tail,
                         h.stype)
            if wait:
                wait_end[0] = file_from + wrote[0]
        self.counts[4 + (0 if answer else 1)] += 1
        return 1


cdef inline void index_keys(uint8_t* ix, int64_t slots, int64_t entries, int32_t topic_hash,
                            const uint8_t* text, SendProps* sp, int64_t phy,
                            int64_t now) noexcept nogil:
    """UNIQ_KEY, then every non-empty KEYS token (buildIndex's order); the
    caller has checked the file has room for all of them."""
    cdef Py_ssize_t k = 0, ks
    cdef const uint8_t* keys
    if sp.uniq_at >= 0:
        index_put(ix, slots, entries, index_key_hash(topic_hash, text + sp.uniq_at, sp.uniq_len),
                  phy, now)
    if sp.keys_at < 0:
        return
    keys = text + sp.keys_at
    while k < sp.keys_len:
        while k < sp.keys_len and keys[k] == 32:
            k += 1
        ks = k
        while k < sp.keys_len and keys[k] != 32:
            k += 1
        if k > ks:
            index_put(ix, slots, entries, index_key_hash(topic_hash, keys + ks, k - ks), phy, now)


cdef uint8_t* respond_head(Out o, bytes host_hex, int stype) noexcept:
    """Start a SUCCESS response frame at the end of ``o`` (room reserved), in
    the request's serialization: the frame's 8-byte prefix (and in a
    ROCKETMQ header the opaque and the lengths) are left for
    ``respond_tail``; returns where the msgId value goes (after ``host_hex``
    when given)."""
    cdef uint8_t* p = o.data + o.n + 8
    if stype:
        # code 0 (int16), JAVA (int8), version 409 (int16), opaque (later),
        # flag RPC_RESPONSE, no remark, extFields length (later), then
        # msgId's key and its value's length (later)
        memcpy(p, b"\x00\x00\x00\x01\x99\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00", 17)
        memcpy(p + 21, b"\x00\x05msgId", 7)
        p += 32
    else:
        memcpy(p, b'{"code":0,"extFields":{"msgId":"', 32)
        p += 32
    if host_hex is not None:
        memcpy(p, PyBytes_AS_STRING(host_hex), PyBytes_GET_SIZE(host_hex))
        p += PyBytes_GET_SIZE(host_hex)
    return p


cdef inline void put_hex16(uint8_t* p, int64_t v) noexcept nogil:
    """``v`` as 16 upper-case hex digits (two's complement)."""
    cdef uint64_t u = <uint64_t>v
    cdef int i
    for i in range(16):
        p[15 - i] = HEX[u & 0xF]
        u >>= 4


cdef void respond_tail(Out o, uint8_t* p, int64_t qid, int64_t qoff, int64_t opaque,
                       bytes tail, int stype) noexcept:
    """Finish the frame ``respond_head`` started, the msgId value ending at
    ``p``: queueId, queueOffset, the fixed tail and the opaque, then the
    frame's prefix."""
    cdef uint8_t* start = o.data + o.n
    if stype:
        put32(start + 36, <int32_t>(p - start - 40))  # msgId's length
        p = rmq_entry(p, b"\x00\x07queueId", 9, qid)
        p = rmq_entry(p, b"\x00\x0bqueueOffset", 13, qoff)
        memcpy(p, PyBytes_AS_STRING(tail), PyBytes_GET_SIZE(tail))
        p += PyBytes_GET_SIZE(tail)
        put32(start + 13, <int32_t>opaque)
        put32(start + 25, <int32_t>(p - start - 29))
    else:
        memcpy(p, b'","queueId":"', 13)
        p = json_write_int(p + 13, qid)
        memcpy(p, b'","queueOffset":"', 17)
        p = json_write_int(p + 17, qoff)
        memcpy(p, PyBytes_AS_STRING(tail), PyBytes_GET_SIZE(tail))
        p = json_write_int(p + PyBytes_GET_SIZE(tail), opaque)
        memcpy(p, b',"serializeTypeCurrentRPC":"JSON","version":409}', 48)
        p += 48
    cdef Py_ssize_t hlen = p - start - 8
    put32(start, <int32_t>(hlen + 4))
    put32(start + 4, <int32_t>(hlen | (stype << 24)))
    o.n += p - start


cdef inline uint8_t* rmq_entry(uint8_t* p, const char* key, Py_ssize_t klen,
                               int64_t v) noexcept:
    """A ROCKETMQ extFields entry at ``p``: ``key`` (with its length) and
    ``v``'s digits with theirs; returns the end of the digits."""
    memcpy(p, key, klen)
    p += klen + 4
    cdef uint8_t* stop = json_write_int(p, v)
    put32(p - 4, <int32_t>(stop - p))
    return stop


cdef void set_props(Plain* sends, Py_ssize_t n, Out props) noexcept:
    """Each of ``sends[:n]``' stored properties placed in ``props``, where
    ``plain_read`` wrote them one after the other (the buffer may have moved
    as it grew)."""
    cdef Py_ssize_t i, at = 0
    for i in range(n):
        sends[i].props = props.data + at
        at += sends[i].props_len


cdef enum:
    MAX_TALLY = 64  # distinct topics a read's stored sends are counted by in C


cdef struct Tally:
    # a topic of a read's stored sends (borrowed from a send), or a request
    # code and oneway
    PyObject* key
    int64_t code
    int oneway
    int64_t count, size


cdef inline bint same_key(PyObject* a, object b) except -1:
    """``a == b`` as a dict key compares them (by identity first)."""
    if a == <PyObject*>b:
        return True
    return (<object>a) == b


cdef inline int topic_slot(Tally* t, int* n, object key) except -2:
    """The place of ``key`` in ``t[:n]``, added when met first; -1 when
    ``MAX_TALLY`` others are there already."""
    cdef int k
    for k in range(n[0]):
        if same_key(t[k].key, key):
            return k
    if n[0] == MAX_TALLY:
        return -1
    k = n[0]
    n[0] += 1
    t[k].key = <PyObject*>key
    t[k].count = t[k].size = 0
    return k


cdef inline int code_slot(Tally* t, int* n, int64_t code, int oneway) noexcept:
    """The place of (``code``, ``oneway``) in ``t[:n]`` (of at most four:
    the single sends' two codes, each oneway or not), added when met
    first."""
    cdef int k
    for k in range(n[0]):
        if t[k].code == code and t[k].oneway == oneway:
            return k
    k = n[0]
    n[0] += 1
    t[k].code = code
    t[k].oneway = oneway
    t[k].count = 0
    return k


cdef int tally_puts(const Plain* sends, const Put* puts, Py_ssize_t n, dict sizes,
                    dict counts) except -1:
    """Count the stored ``sends[:n]``: [messages, bytes] per topic in
    ``sizes`` (the put statistics), sends per (request code, oneway) in
    ``counts``; in C arrays first, then each added to its dict once (in the
    order first met, as the twin's per-send updates leave them); a read of
    more than ``MAX_TALLY`` topics counts them send by send."""
    cdef Tally topics[MAX_TALLY]
    cdef Tally codes[4]
    cdef int nt = 0, nc = 0, k
    cdef Py_ssize_t i
    cdef bint each = False
    cdef list t
    for i in range(n):
        k = code_slot(codes, &nc, sends[i].code, 1 if sends[i].flag & RPC_ONEWAY else 0)
        codes[k].count += 1
        if not each:
            k = topic_slot(topics, &nt, <object>sends[i].topic)
            if k >= 0:
                topics[k].count += 1
                topics[k].size += puts[i].size
                continue
            each = True
            nt = 0
            for k in range(i):
                add_size(sizes, <object>sends[k].topic, 1, puts[k].size)
        add_size(sizes, <object>sends[i].topic, 1, puts[i].size)
    for k in range(nt):
        add_size(sizes, <object>topics[k].key, topics[k].count, topics[k].size)
    for k in range(nc):
        key = (codes[k].code, codes[k].oneway == 1)
        counts[key] = counts.get(key, 0) + codes[k].count
    return 0


cdef inline int add_size(dict sizes, topic, int64_t count, int64_t size) except -1:
    """``count`` messages of ``size`` bytes more of ``topic`` in ``sizes``."""
    cdef list t = sizes.get(topic)
    if t is None:
        sizes[topic] = [count, size]
    else:
        t[0] += count
        t[1] += size
    return 0


cdef tuple answer_puts(bytes host_hex, tuple tails, const Plain* sends, const Put* puts,
                       Py_ssize_t n):
    """The SUCCESS frames of the stored ``sends[:n]``, joined, as
    ``response_frame`` builds each, and the answered sends' (opaque,
    serialize type) packed as ``ANSWERED`` (what a failed quorum wait
    answers instead); oneway sends get none."""
    cdef Out o = Out()
    cdef Out pairs = Out()
    cdef const Plain* s
    cdef bytes tail
    cdef uint8_t* p
    cdef uint64_t v
    cdef int j
    cdef Py_ssize_t i
    for i in range(n):
        s = &sends[i]
        if s.flag & RPC_ONEWAY:
            continue
        if s.stype != 0 and s.stype != 1:
            raise ValueError("serialize type %d" % s.stype)
        tail = tails[s.stype]
        o.reserve(RESPONSE_ROOM + PyBytes_GET_SIZE(host_hex) + PyBytes_GET_SIZE(tail))
        p = respond_head(o, host_hex, s.stype)
        put_hex16(p, puts[i].phy)
        respond_tail(o, p + 16, s.qid, puts[i].qoff, s.opaque, tail, s.stype)
        pairs.reserve(ANSWERED_SIZE)
        p = pairs.data + pairs.n
        v = <uint64_t>s.opaque
        for j in range(8):  # (little-endian: struct's "<qB")
            p[j] = <uint8_t>(v >> (8 * j))
        p[8] = <uint8_t>s.stype
        pairs.n += ANSWERED_SIZE
    out = o.take()
    answered = pairs.take()
    return b"" if out is None else out, b"" if answered is None else answered


cdef object field_text(Field* f):
    """A header value as the general reader makes it (None when absent)."""
    cdef uint8_t* tmp
    cdef Py_ssize_t n
    cdef bint wide
    if f.kind == 0:
        return None
    if f.kind == JV_TRUE:
        return "true"
    if f.kind == JV_FALSE:
        return "false"
    if f.kind == JV_INT:
        return (<bytes>PyBytes_FromStringAndSize(<const char*>f.start, f.stop - f.start)).decode()
    tmp = <uint8_t*>PyMem_Malloc(f.s.n + 1)
    if tmp == NULL:
        raise MemoryError()
    try:
        n = json_unescape(f.s.s, f.s.n, tmp, &wide) if f.s.esc else f.s.n
        if not f.s.esc:
            memcpy(tmp, f.s.s, n)
        return (<bytes>PyBytes_FromStringAndSize(<const char*>tmp, n)).decode()
    finally:
        PyMem_Free(tmp)


def send_head(buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t max_frame):
    """The send request at ``buf[pos:end]`` as the lane reads it: (code, flag,
    opaque, the fourteen header fields of its spelling as texts or None,
    body length, end of the frame), or None for what the lane leaves to the
    general path.  For tests and fuzzing: whatever it returns, the general
    reader must read the same."""
    cdef Py_buffer view
    cdef Head h
    cdef Field* f
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if pos < 0 or end > view.len or pos > end:
            raise ValueError("pos/end outside the buffer")
        if not read_head(<const uint8_t*>view.buf, pos, end, max_frame, &h):
            return None
        f = &h.v1[0] if h.code == SEND_V1 else &h.v2[0]
        return (h.code, h.flag, h.opaque, tuple([field_text(&f[i]) for i in range(NF)]),
                h.body_len, h.frame_end)
    finally:
        PyBuffer_Release(&view)


# A DLedger leader's lane (twin: ``DLedgerSendLane`` in rmq/broker/dledger_lane.py):
# a read served (read, stored, counted, answered: ``read_stored``) and its
# answers held on the group's quorum wait, with the broker's, the commit
# log's and the connection's fields read at their slots -- no Python frame
# a read, nor for its answers once a quorum holds its entries
# (``HeldAnswers``, written by ``write_frames``).
cdef class DLedgerLane:
    """``DLedgerSendLane``'s ``serve`` and ``served``, over its compiled
    frame reader ``frames``; ``put_ok`` is ``PutMessageStatus.PUT_OK`` and
    ``failed(processor, channel, answered, status)`` the answers of a read
    whose quorum wait failed (the twin's ``_answer_failed``)."""
    cdef readonly object support
    cdef readonly SendLane frames
    cdef object put_ok, failed
    cdef dict counts            # the last serve's sends per (request code, oneway)
    # what the reads are stored and answered with, kept until its source
    # changes (compared by identity): the cluster name, the store host
    # field, the message-id prefix; and the last connection's born field
    cdef object cluster_of, store_of, prefix_of, born
    cdef bytes cluster_b, host_hex_b
    cdef int32_t store_bits, born_bits
    cdef ClassOffsets f_processor

    def __init__(self, SendLane frames not None, put_ok, failed):
        self.support = frames.support
        self.frames = frames
        self.put_ok = put_ok
        self.failed = failed
        self.counts = {}
        self.cluster_b = self.host_hex_b = b""
        self.f_processor = ClassOffsets(("cluster",), True)

    def served(self):
        """(request code, oneway, count) of what the last ``serve`` took."""
        return [(code, oneway, n) for (code, oneway), n in sorted(self.counts.items())]

    def serve(self, channel, buf, Py_ssize_t pos, Py_ssize_t end):
        """Store the plain sends at the start of ``buf[pos:end]``: (position
        of the first frame left to the general path, None: the answers go
        out when the quorum wait ends)."""
        cdef SendLane fr = self.frames
        cdef dict counts = {}
        cdef dict sizes = {}
        cdef Py_ssize_t* fl
        cdef Py_ssize_t* fp
        cdef long long served = 0
        cdef PutCounters pc
        self.counts = counts
        sup = fr.support
        cl = fr.s_cl
        processor = fr.s_processor
        born = fr.born_of(channel)
        if born is not self.born:
            self.born = born
            self.born_bits = BORNHOST_V6 if len(born) == 20 else 0
        cluster = slot_or_attr(processor, offsets_of(self.f_processor, processor)[0], "cluster")
        fl = offsets_of(fr.f_cl, cl)
        store_host = slot_or_attr(cl, fl[6], "store_host_field")
        prefix = slot_or_attr(cl, fl[7], "msg_id_prefix")
        if cluster is not self.cluster_of or store_host is not self.store_of or \
                prefix is not self.prefix_of:
            self.cluster_of, self.store_of, self.prefix_of = cluster, store_host, prefix
            self.cluster_b = cluster.encode()
            self.store_bits = STOREHOST_V6 if len(store_host) == 20 else 0
            self.host_hex_b = prefix.encode()
        n, after, first, last, answers, answered = fr.read_stored(
            self.cluster_b, buf, pos, end, cl, self.born_bits | self.store_bits, born, now_ms(),
            self.host_hex_b, fr.tails(), sizes, counts)
        if not n:
            return pos, None
        stats = fr.s_sstats
        pc = counters_of(stats)
        for topic, t in sizes.items():
            nums, size = t
            if pc is not None:
                pc.count_puts(topic, nums, size, nums)
            else:
                stats.on_puts(topic, nums, size, nums)
            served += <long long>nums
        fp = offsets_of(fr.f_sup, sup)
        set_slot_or_attr(sup, fp[0], "served", slot_or_attr(sup, fp[0], "served") + served)
        # the read's answers held on the quorum wait of its last entry (which
        # covers the earlier ones)
        cl.quorum_wait(first, last, held_answers(self, channel, answers, answered)
                       if answers else no_answer)
        return after, None


def no_answer(status):
    """The quorum wait of a read of oneway sends: nothing to answer."""


@cython.final
@cython.freelist(16)
cdef class HeldAnswers:
    """A read's answers held on its quorum wait (called with its
    PutMessageStatus when the wait ends; the twin's ``_answer`` bound by
    ``functools.partial``): on PUT_OK the frames as built, queued on the
    connection to go out at the end of the loop's turn with the other
    reads' answers (``write_frames``), else the general path's failure
    answers (the lane's ``failed``)."""
    cdef DLedgerLane lane
    cdef object channel
    cdef bytes frames, answered

    def __call__(self, status):
        cdef DLedgerLane lane = self.lane
        if status is lane.put_ok:
            write_frames(self.channel, self.frames, True)
        else:
            lane.failed(lane.frames.s_processor, self.channel, self.answered, status)


cdef HeldAnswers held_answers(DLedgerLane lane, channel, bytes frames, bytes answered):
    cdef HeldAnswers h = HeldAnswers.__new__(HeldAnswers)
    h.lane, h.channel = lane, channel
    h.frames, h.answered = frames, answered
    return h
