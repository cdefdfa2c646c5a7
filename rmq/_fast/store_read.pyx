# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twins of ``rmq.store.reader.QueueScan`` -- the walk over the
consume-queue entries of one ``getMessage`` -- and of ``read_queue``, which
drives it (looks the commit-log files up and fills the result).

One call reads the 20-byte entries (offset, size, tags code) in C, applies
the filler / next-file skips, the batch limits of 4.9.8 and the tag filter,
and gathers the accepted records into *runs*: records adjacent in the commit
log become one memoryview of the mapped file, so a pull of 32 messages
written together is one slice, not 32.  Entries outside the readable part of
the current mapped file hand control back to the caller (``NEED_FILE``),
which looks the file up and resumes; that happens once per file, not per
message.  Same attributes, same results (byte for byte) as the twin.
"""

from cpython.array cimport array, clone
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec

from rmq._fast.byteorder cimport get32, get64
from rmq._fast.store_stats cimport PutCounters, counters_of

from array import array as _py_array

from rmq.common.get_message_status import GetMessageStatus

cdef enum:
    UNIT = 20
    FILLER = 0x7FFFFFFF
    S_FOUND = 0
    S_NO_MATCHED = 1
    S_REMOVING = 2

DONE = 0
NEED_FILE = 1

cdef array _SIZES_TEMPLATE = _py_array("i")


cdef class QueueScan:
    """See ``rmq.store.reader.QueueScan`` (the twin) for the contract."""

    cdef public long long offset, max_phy, memory_limit, mem_bytes, disk_bytes, max_bytes
    cdef public int max_nums, mem_count, disk_count
    cdef public object message_filter
    cdef public Py_ssize_t pos
    cdef public int status, count
    cdef public long long total, max_phy_pulling, next_phy_file_start
    cdef public long long pending_offset
    cdef public int pending_size
    cdef public list runs, run_offsets, run_counts
    cdef int32_t *_sizes
    cdef Py_ssize_t _cap

    def __cinit__(self):
        self._sizes = NULL
        self._cap = 0

    def __init__(self, long long offset, int max_nums, long long max_phy,
                 long long memory_limit, long long mem_bytes, int mem_count,
                 long long disk_bytes, int disk_count, long long max_bytes,
                 message_filter):
        self._setup(offset, max_nums, max_phy, memory_limit, mem_bytes, mem_count, disk_bytes,
                    disk_count, max_bytes, message_filter)

    cdef int _setup(self, long long offset, int max_nums, long long max_phy,
                    long long memory_limit, long long mem_bytes, int mem_count,
                    long long disk_bytes, int disk_count, long long max_bytes,
                    message_filter) except -1:
        """``__init__``'s fields (``read_queue`` makes its scan with
        ``__new__`` and this: no argument tuple of Python numbers)."""
        self.offset = offset
        self.max_nums = max_nums
        self.max_phy = max_phy
        self.memory_limit = memory_limit
        self.mem_bytes = mem_bytes
        self.mem_count = mem_count
        self.disk_bytes = disk_bytes
        self.disk_count = disk_count
        self.max_bytes = max_bytes
        self.message_filter = message_filter
        self.pos = 0
        self.status = S_NO_MATCHED
        self.count = 0
        self.total = 0
        self.max_phy_pulling = 0
        self.next_phy_file_start = -1
        self.pending_offset = 0
        self.pending_size = 0
        self.runs = []
        self.run_offsets = []
        self.run_counts = []
        return 0

    def __dealloc__(self):
        free(self._sizes)

    cdef bint _full(self, int32_t size, int64_t off):
        """``isTheBatchFull`` of 4.9.8 for the entry about to be taken."""
        cdef long long limit_bytes
        cdef int limit_count
        if self.total == 0 or self.count == 0:
            return False
        if self.max_nums <= self.count:
            return True
        if self.max_phy - off > self.memory_limit:
            limit_bytes = self.disk_bytes
            limit_count = self.disk_count
        else:
            limit_bytes = self.mem_bytes
            limit_count = self.mem_count
        if self.max_bytes >= 0 and self.max_bytes < limit_bytes:
            limit_bytes = self.max_bytes
        return self.total + size > limit_bytes or self.count > limit_count - 1

    cdef int _keep_size(self, int32_t size) except -1:
        cdef Py_ssize_t cap
        cdef int32_t *grown
        if self.count >= self._cap:
            cap = 64 if self._cap == 0 else self._cap * 2
            grown = <int32_t *>realloc(self._sizes, cap * sizeof(int32_t))
            if grown == NULL:
                raise MemoryError()
            self._sizes = grown
            self._cap = cap
        self._sizes[self.count] = size
        return 0

    def scan(self, cq, Py_ssize_t limit, file_view, long long file_start,
             long long readable_end):
        """Walk entries from ``pos`` up to ``limit`` bytes of ``cq``; accepted
        records are sliced out of ``file_view`` (the mapped file starting at
        commit-log offset ``file_start``, readable up to ``readable_end``).
        DONE, or NEED_FILE with ``pending_offset``/``pending_size`` set and
        ``pos`` on that entry."""
        return self._scan(cq, limit, file_view, file_start, readable_end)

    cdef int _scan(self, cq, Py_ssize_t limit, file_view, long long file_start,
                   long long readable_end) except -1:
        cdef Py_buffer pb
        cdef const uint8_t *p
        cdef Py_ssize_t pos = self.pos
        cdef int64_t off, tags, run_start = 0, run_end = -1, run_first = 0, index
        cdef int run_count = 0
        cdef int32_t size
        cdef int result = DONE
        cdef bint has_file = file_view is not None
        cdef object matches = self.message_filter
        PyObject_GetBuffer(cq, &pb, PyBUF_SIMPLE)
        try:
            if limit > pb.len:
                limit = pb.len
            limit -= limit % UNIT
            if pos < 0:
                raise ValueError("negative scan position")
            p = <const uint8_t *>pb.buf
            while pos + UNIT <= limit:
                off = get64(p + pos)
                size = get32(p + pos + 8)
                self.max_phy_pulling = off
                if size == FILLER or (self.next_phy_file_start >= 0
                                      and off < self.next_phy_file_start):
                    pos += UNIT
                    continue
                if self._full(size, off):
                    break
                if matches is not None:
                    tags = get64(p + pos + 12)
                    if not matches(tags):
                        pos += UNIT
                        continue
                if not (has_file and size >= 0 and off >= file_start
                        and off + size <= readable_end):
                    self.pending_offset = off
                    self.pending_size = size
                    result = NEED_FILE
                    break
                index = self.offset + pos // UNIT
                if off != run_end or index != run_first + run_count:
                    if run_end >= 0:
                        self._close_run(file_view, file_start, run_start, run_end, run_first,
                                        run_count)
                    run_start = off
                    run_first = index
                    run_count = 0
                run_end = off + size
                run_count += 1
                self._keep_size(size)
                self.count += 1
                self.total += size
                self.status = S_FOUND
                self.next_phy_file_start = -1
                pos += UNIT
            if run_end >= 0:
                self._close_run(file_view, file_start, run_start, run_end, run_first, run_count)
        finally:
            PyBuffer_Release(&pb)
        self.pos = pos
        return result

    cdef int _close_run(self, file_view, int64_t file_start, int64_t start, int64_t end,
                        int64_t first, int n) except -1:
        self.runs.append(file_view[start - file_start:end - file_start])
        self.run_offsets.append(first)
        self.run_counts.append(n)
        return 0

    def skip_missing(self, long long next_file_start):
        """The pending entry's record is not readable (file gone or not yet
        readable): skip it and every entry before ``next_file_start``."""
        if self.count == 0:
            self.status = S_REMOVING
        self.next_phy_file_start = next_file_start
        self.pos += UNIT

    def sizes(self):
        """The accepted records' sizes, in order (``array('i')``)."""
        cdef array out = clone(_SIZES_TEMPLATE, self.count, False)
        if self.count:
            memcpy(out.data.as_voidptr, self._sizes, self.count * sizeof(int32_t))
        return out


cdef object _FOUND_NULL = GetMessageStatus.OFFSET_FOUND_NULL
cdef tuple _SCAN_STATUS = (GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE,
                           GetMessageStatus.MESSAGE_WAS_REMOVING)


def read_queue(reader, cq, result, long long offset, int max_nums, max_bytes, message_filter,
               long long max_phy):
    """Compiled twin of ``rmq.store.reader.read_queue`` (the same steps, the
    scan called in C, the numbers typed)."""
    c_read_queue(reader, cq, result, offset, max_nums, max_bytes, message_filter, max_phy)


cdef c_read_queue(reader, cq, result, long long offset, int max_nums, max_bytes, message_filter,
                  long long max_phy):
    cdef QueueScan scan
    cdef long long memory_limit, file_start = 0, readable_end = 0, off, fall
    cdef int size
    cdef Py_ssize_t limit, n
    buf = index_buffer(cq, offset)
    if buf is None:
        result.status = _FOUND_NULL
        # the fields the found path sets (a result of ``new_result`` has none)
        result.body_views = []
        result.run_offsets = []
        result.run_counts = []
        result.sizes = clone(_SIZES_TEMPLATE, 0, False)
        result.buffer_total_size = 0
        result.suggest_pulling_from_slave = False
        result.disk_fall_behind = -1
        per_file = cq.file_size // UNIT
        result.next_begin_offset = reader._next_offset_correction(
            offset, offset + per_file - offset % per_file)
        return
    view = (<tuple>buf)[0]
    cfg = reader.config
    memory_limit = reader._memory_limit
    scan = QueueScan.__new__(QueueScan)
    scan._setup(offset, max_nums, max_phy, memory_limit,
                cfg.maxTransferBytesOnMessageInMemory, cfg.maxTransferCountOnMessageInMemory,
                cfg.maxTransferBytesOnMessageInDisk, cfg.maxTransferCountOnMessageInDisk,
                -1 if max_bytes is None else max_bytes, message_filter)
    limit = max(16000, <Py_ssize_t>max_nums * UNIT)
    n = len(view)
    if n < limit:
        limit = n
    commit_log = reader.commit_log
    file_view = None
    try:
        while scan._scan(view, limit, file_view, file_start, readable_end) == NEED_FILE:
            off = scan.pending_offset
            size = scan.pending_size
            if file_view is not None:
                file_view.release()  # the runs cut from it stay valid
                file_view = None
            found = readable_file(commit_log, off, size)
            if found is None:
                scan.skip_missing(commit_log.roll_next_file(off))
            else:
                file_view = (<tuple>found)[0]
                file_start = (<tuple>found)[1]
                readable_end = file_start + len(file_view)
    finally:
        view.release()
        if file_view is not None:
            file_view.release()
    result.body_views = scan.runs
    result.run_offsets = scan.run_offsets
    result.run_counts = scan.run_counts
    result.sizes = scan.sizes()
    result.buffer_total_size = scan.total
    result.status = _SCAN_STATUS[scan.status]
    result.next_begin_offset = offset + scan.pos // UNIT
    fall = max_phy - scan.max_phy_pulling
    result.disk_fall_behind = fall
    result.suggest_pulling_from_slave = fall > memory_limit


cdef object _RESULT = None  # GetMessageResult
cdef long _NOT_READABLE = 0  # RunningFlags' bit that refuses reads
cdef str _LMQ_PREFIX = None
cdef object _READ_MESSAGES = None  # the twin, MessageReaderMixin.read_messages
# CommitLog, ConsumeQueue, MappedFileQueue, MappedFile: their methods below are
# read without a call for these exact classes (a DLedger commit log has its own
# readable end), by calling them for any other
cdef object _CL = None
cdef object _CQ = None
cdef object _MFQ = None
cdef object _MF = None
cdef bint _bound = False


# GetMessageResult's fields, all of which ``new_result`` and ``c_read_queue`` set
cdef tuple _RESULT_SLOTS = ("status", "next_begin_offset", "min_offset", "max_offset",
                            "body_views", "run_offsets", "run_counts", "sizes",
                            "buffer_total_size", "suggest_pulling_from_slave",
                            "disk_fall_behind", "msg_count4_commercial", "_buffers")


def bind(result_type: type, not_readable: int, lmq_prefix: str, read_messages: object,
         commit_log_type: type, cq_type: type, mfq_type: type, mf_type: type) -> None:
    """GetMessageResult, RunningFlags' NOT_READABLE_BIT, the LMQ topics'
    prefix, the pure-Python ``read_messages`` (which reads what the compiled
    one leaves), and the classes CommitLog, ConsumeQueue, MappedFileQueue and
    MappedFile, handed over by rmq.store.reader (a layer above)."""
    global _RESULT, _NOT_READABLE, _LMQ_PREFIX, _READ_MESSAGES, _CL, _CQ, _MFQ, _MF, _bound
    if getattr(result_type, "__slots__", None) != _RESULT_SLOTS:
        raise TypeError(f"new_result and c_read_queue set the fields {_RESULT_SLOTS}, "
                        f"not those of {result_type!r}")
    _RESULT = result_type
    _NOT_READABLE = not_readable
    _LMQ_PREFIX = lmq_prefix
    _READ_MESSAGES = read_messages
    _CL = commit_log_type
    _CQ = cq_type
    _MFQ = mfq_type
    _MF = mf_type
    _bound = True


cdef inline long long read_position(object mf) except? -1:
    """``MappedFile.read_position``."""
    if type(mf) is not _MF:
        return mf.read_position()
    if mf.write_buffer is not None:
        return mf.committed_position
    return mf.wrote_position


cdef object find_file(object mfq, long long offset):
    """``MappedFileQueue.find_mapped_file_by_offset``: the file at its index;
    the method's walk when that one does not hold ``offset``."""
    if type(mfq) is not _MFQ or offset < 0:
        return mfq.find_mapped_file_by_offset(offset)
    files = mfq.mapped_files
    if not files:
        return None
    cdef long long size = mfq.mapped_file_size
    cdef long long first = files[0].file_from_offset
    cdef long long start
    cdef Py_ssize_t idx
    if size > 0 and first >= 0:
        idx = <Py_ssize_t>(offset // size - first // size)
        if 0 <= idx < len(files):
            mf = files[idx]
            start = mf.file_from_offset
            if start <= offset < start + size:
                return mf
    return mfq.find_mapped_file_by_offset(offset)


cdef object select_rest(object mf, long long pos):
    """``MappedFile.select(pos)``: the readable bytes from ``pos`` on, None
    when there are none or the file is unmapped."""
    if type(mf) is not _MF:
        return mf.select(pos)
    cdef long long end = read_position(mf)
    if pos < 0 or pos >= end:
        return None
    try:
        return mf.view[pos:end]
    except ValueError:  # released: unmapped
        return None


cdef object index_buffer(object cq, long long start_index):
    """``ConsumeQueue.get_index_buffer``."""
    if type(cq) is not _CQ or start_index < 0:
        return cq.get_index_buffer(start_index)
    cdef long long offset = start_index * UNIT
    if offset < cq.min_logic_offset:
        return None
    mf = find_file(cq.mfq, offset)
    if mf is None:
        return None
    view = select_rest(mf, offset % <long long>cq.file_size)
    if view is None:
        return None
    return view, offset


cdef object readable_file(object cl, long long offset, int size):
    """``CommitLog.readable_file``."""
    if type(cl) is not _CL:
        return cl.readable_file(offset, size)
    mf = find_file(cl.mfq, offset)
    if mf is None:
        return None
    readable = select_rest(mf, 0)
    if readable is None:
        return None
    cdef long long start = mf.file_from_offset
    if size >= 0 and start <= offset and offset + size <= start + len(readable):
        return readable, start
    readable.release()
    return None


cdef long long max_offset(object cl) except? -1:
    """``CommitLog.get_max_offset`` (its MappedFileQueue's readable end)."""
    if type(cl) is not _CL:
        return cl.get_max_offset()
    mfq = cl.mfq
    if type(mfq) is not _MFQ:
        return mfq.get_max_offset()
    files = mfq.mapped_files
    if not files:
        return 0
    last = files[len(files) - 1]
    return <long long>last.file_from_offset + read_position(last)


cdef inline object dict_get(object d, object key):
    """``d.get(key)``, without the method call for a plain dict (the keys
    here, a topic's str or a queue id's int, hash without fail)."""
    cdef PyObject *found
    if type(d) is not dict:
        return d.get(key)
    found = PyDict_GetItem(d, key)
    return None if found == NULL else <object>found


cdef inline long long now_ms() noexcept nogil:
    """time.time_ns() // 1_000_000."""
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <long long>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


cdef object new_result(object min_off, object max_off):
    """``GetMessageResult(min_offset=min_off, max_offset=max_off)`` without
    the dataclass's ``__init__``, whose default lists and array the read
    replaces at once: the fields ``c_read_queue`` does not set are set here,
    the rest by it, on each of its paths."""
    result = _RESULT.__new__(_RESULT)
    result.min_offset = min_off
    result.max_offset = max_off
    result.msg_count4_commercial = 0
    result._buffers = None
    return result


cdef object c_read_messages(object store, object group, object topic, object queue_id,
                            object offset, object max_msg_nums, object max_total_msg_size,
                            object message_filter):
    """``MessageReaderMixin.read_messages`` for a readable store and an
    offset inside a queue that exists (no LMQ topic, no consume-queue
    extension with a filter): the store's positions read without calls
    (``CommitLog.get_max_offset``, ``_existing_cq``, the queue's lowest and
    highest offsets) and the scan started at once; anything else is the
    twin's, which it then reads from the start."""
    if not _bound:
        raise RuntimeError("store_read.bind was not called")
    if store._shutdown or <long>store.running_flags.flag_bits & _NOT_READABLE or \
            type(topic) is not str or (<str>topic).startswith(_LMQ_PREFIX) or \
            type(offset) is not int:
        return _READ_MESSAGES(store, group, topic, queue_id, offset, max_msg_nums,
                              max_total_msg_size, message_filter)
    cdef long long max_phy = max_offset(store.commit_log)
    qs = dict_get(store.consume_queue_table, topic)
    cq = dict_get(qs, queue_id) if qs is not None else None
    if type(cq) is not _CQ or (cq.ext is not None and message_filter is not None):
        return _READ_MESSAGES(store, group, topic, queue_id, offset, max_msg_nums,
                              max_total_msg_size, message_filter)
    min_off = cq.min_logic_offset // UNIT
    # ConsumeQueue.get_max_offset_in_queue (its _last_written: the last file with entries)
    cq_files = cq.mfq.mapped_files
    mf = None
    cdef Py_ssize_t i = len(cq_files)
    while i > 0:
        i -= 1
        f = cq_files[i]
        if f.wrote_position:
            mf = f
            break
    if mf is None and cq_files:
        mf = cq_files[0]
    max_off = (mf.file_from_offset + read_position(mf)) // UNIT if mf is not None else 0
    if max_off == 0 or not min_off <= offset < max_off:
        return _READ_MESSAGES(store, group, topic, queue_id, offset, max_msg_nums,
                              max_total_msg_size, message_filter)
    result = new_result(min_off, max_off)
    c_read_queue(store, cq, result, offset, max_msg_nums, max_total_msg_size, message_filter,
                 max_phy)
    return result


def read_messages(store, group, topic, queue_id, offset, max_msg_nums, max_total_msg_size=None,
                  message_filter=None):
    """Compiled twin of ``MessageReaderMixin.read_messages`` (set on the
    class when built)."""
    return c_read_messages(store, group, topic, queue_id, offset, max_msg_nums,
                           max_total_msg_size, message_filter)


def get_message(store, group, topic, queue_id, offset, max_msg_nums, max_total_msg_size=None,
                message_filter=None):
    """Compiled twin of ``MessageReaderMixin.get_message`` (set on the class
    when built): ``read_messages`` and its count (``count_get``)."""
    cdef long long begin = now_ms()
    cdef PutCounters counters
    result = c_read_messages(store, group, topic, queue_id, offset, max_msg_nums,
                             max_total_msg_size, message_filter)
    if result is not None:
        stats = store.stats
        counters = counters_of(stats)
        if counters is not None:
            counters.count_get(len(result.sizes), now_ms() - begin)
        else:
            stats.on_get(len(result.sizes), now_ms() - begin)
    return result
