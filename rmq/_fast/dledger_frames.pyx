# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""A DLedger leader's APPEND push written as a whole remoting frame, and a
follower's answer frame found in a receive buffer, without a
``RemotingCommand`` either way: the compiled twins of ``push_frame`` and
``answer_at`` in rmq/dledger/rpc.py.

``push_frame`` writes the frame the general client writes for the same
request (its JSON header with the opaque, then the body) in one exactly
sized allocation.  ``answer_at`` takes only a response frame whose JSON
header has exactly the form rmq and 0.3.1.2 answer with -- code, flag,
language, opaque, serializeTypeCurrentRPC (optional) and version, in that
order, integers in JSON's form within int32, no whitespace, no remark, no
extFields; anything else is left to the general decoder (None), which reads
or refuses it as before.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_CheckExact
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t

from rmq._fast.byteorder cimport put32
from rmq._fast.dledger_push cimport answer_fields, kept_at, monotonic
from rmq._fast.dledger_wire cimport json_frame, new_instance
from rmq._fast.json_text cimport json_int32 as int32_json, json_step
from rmq._fast.slots cimport set_slot_at_offset, set_slot_or_attr, slot_offsets, slot_or_attr
from rmq._fast.store_put cimport ClassOffsets
from libc.string cimport memcpy

import logging
from types import MemberDescriptorType

log = logging.getLogger("rmq.dledger")


def push_frame(bytes head, int32_t opaque, bytes tail, bytes body):
    """The frame of ``head``, ``opaque`` in decimal, ``tail`` (the JSON
    header) and ``body``, with its length and header-length words."""
    cdef char digits[12]
    cdef int nd = 0
    cdef uint32_t v = <uint32_t>(-<int64_t>opaque) if opaque < 0 else <uint32_t>opaque
    cdef Py_ssize_t hn, bn = PyBytes_GET_SIZE(body)
    cdef char* p
    while True:
        digits[11 - nd] = <char>(48 + v % 10)
        nd += 1
        v //= 10
        if v == 0:
            break
    if opaque < 0:
        digits[11 - nd] = 45
        nd += 1
    hn = PyBytes_GET_SIZE(head) + nd + PyBytes_GET_SIZE(tail)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, 8 + hn + bn)
    p = PyBytes_AS_STRING(out)
    put32(<uint8_t*>p, <int32_t>(4 + hn + bn))
    put32(<uint8_t*>p + 4, <int32_t>hn)
    p += 8
    memcpy(p, PyBytes_AS_STRING(head), PyBytes_GET_SIZE(head))
    p += PyBytes_GET_SIZE(head)
    memcpy(p, digits + 12 - nd, nd)
    p += nd
    memcpy(p, PyBytes_AS_STRING(tail), PyBytes_GET_SIZE(tail))
    p += PyBytes_GET_SIZE(tail)
    memcpy(p, PyBytes_AS_STRING(body), bn)
    return out


cdef bint _answer(const uint8_t* base, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t max_frame,
                  int64_t* opaque, Py_ssize_t* body, Py_ssize_t* frame_end) noexcept nogil:
    """``answer_at`` on a buffer's bytes: True with its opaque, body start
    and frame end when the whole frame at ``pos`` has the plain answer form."""
    cdef const uint8_t* p
    cdef const uint8_t* hend
    cdef int64_t code, flag, version
    if not json_frame(base, pos, end, max_frame, &p, &hend, frame_end):
        return False
    if not (json_step(&p, hend, '{"code":', 8) and int32_json(&p, hend, &code)
            and json_step(&p, hend, ',"flag":', 8) and int32_json(&p, hend, &flag)
            and json_step(&p, hend, ',"language":"', 13)):
        return False
    if p >= hend or not (65 <= p[0] <= 90 or p[0] == 95):
        return False
    while p < hend and (65 <= p[0] <= 90 or p[0] == 95):
        p += 1
    if not (json_step(&p, hend, '","opaque":', 11) and int32_json(&p, hend, opaque)):
        return False
    json_step(&p, hend, ',"serializeTypeCurrentRPC":"JSON"', 33)
    if not (json_step(&p, hend, ',"version":', 11) and int32_json(&p, hend, &version)
            and json_step(&p, hend, '}', 1)) or p != hend or not flag & 1:
        return False
    body[0] = hend - base
    return True


def answer_at(buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t max_frame):
    """(opaque, body start, frame end) of the whole response frame at
    ``pos`` in ``buf[:end]`` when its header has the plain answer form;
    None for anything else (not whole, not a response, another form)."""
    cdef Py_buffer pb
    cdef int64_t opaque
    cdef Py_ssize_t body, frame_end
    PyObject_GetBuffer(buf, &pb, PyBUF_SIMPLE)
    try:
        if end > pb.len or not _answer(<const uint8_t*>pb.buf, pos, end, max_frame, &opaque,
                                       &body, &frame_end):
            return None
        return opaque, body, frame_end
    finally:
        PyBuffer_Release(&pb)


# A follower's answer to an APPEND push told to its wait (``_Acked`` of
# rmq.dledger.pusher) in C: the answer read where it lies in the receive
# buffer, the wait's, its dispatcher's, the pusher's, the member state's and
# the store's fields at their slots, the water mark raised as
# ``EntryPusher.update_water_mark`` raises it -- without the wait's ``tell``,
# ``update_water_mark``'s Python frames, the body's slice and the answer's
# tuple.  Any answer but a success, or one the compiled reader leaves to the
# general one, is told to ``tell``.  ``bind_acked`` hands over the class and
# ``Role.LEADER`` (rmq.dledger is a layer above this package).
cdef object _acked_class = None
cdef object _leader = None
cdef object _term_changed = None
cdef object _pusher_class = None
cdef object _group_class = None
# where each of ``NEW_GROUP_FIELDS`` lies in an ``AckGroup``, and whether one
# is made in place (by its type's allocator, its slots set: ``wait_then``)
cdef Py_ssize_t group_at[9]
cdef bint group_in_place = False
cdef object _store_class = None  # DLedgerMmapFileStore (``bind_store``)


def bind_store(store_class):
    """``DLedgerMmapFileStore``, whose ``update_committed_index`` is this
    module's: the quorum check commits on one without a method call."""
    global _store_class
    _store_class = store_class


def update_committed_index(store, term, index):
    """``DLedgerMmapFileStore.update_committed_index`` (its twin
    ``rmq.dledger.mmap_store._update_committed_index``): move the committed
    index up (never past this node's last entry), the store's, its member
    state's and its kept entry's fields read and set at their slots."""
    commit(store, term, index)


cdef int commit(object store, object term, object index) except -1:
    cdef Py_ssize_t k[K_N]
    cdef Py_ssize_t s[S_N]
    cdef Py_ssize_t e[E_N]
    _COMMIT.copy(store, k)
    end = field(store, k, K_END, COMMIT_FIELDS)
    if index == -1 or end == -1:
        return 0
    ms = field(store, k, K_STATE, COMMIT_FIELDS)
    _STATE.copy(ms, s)
    if term < field(ms, s, S_TERM, STATE_FIELDS):
        return 0
    if index > end:
        index = end
    if index <= field(store, k, K_COMMITTED, COMMIT_FIELDS):
        return 0
    # (the leader's commit, once per follower's answer: its kept entry, read inline)
    kept = kept_at(field(store, k, K_RECENT, COMMIT_FIELDS),
                   field(store, k, K_RECENT_FIRST, COMMIT_FIELDS), index)
    if kept is not None and index >= field(store, k, K_BEGIN, COMMIT_FIELDS):
        _ENTRY.copy(kept, e)
        pos = field(kept, e, E_POS, ENTRY_FIELDS) + field(kept, e, E_SIZE, ENTRY_FIELDS)
    else:
        pos = store._end_of(index)
    set_slot_or_attr(store, k[K_POS], "committed_pos", pos)
    set_slot_or_attr(store, k[K_COMMITTED], "committed_index", index)
    return 0


def bind_acked(acked_class, leader, term_changed, pusher_class, group_class):
    """``_Acked`` (its instances' answers told here), ``Role.LEADER``,
    ``Code.TERM_CHANGED`` (what ``check_quorum`` settles an older term's
    groups with), ``EntryPusher`` (whose ``_check_quorum`` is this module's:
    an answer to one checks the quorum without a call through the method)
    and ``AckGroup`` (whose quorum, with an outcome, is settled here)."""
    global _acked_class, _leader, _term_changed, _pusher_class, _group_class, group_in_place
    cdef Py_ssize_t i
    slot_offsets(group_class, NEW_GROUP_FIELDS, group_at, MemberDescriptorType)
    group_in_place = group_class.__new__ is object.__new__
    for i in range(len(NEW_GROUP_FIELDS)):
        group_in_place = group_in_place and group_at[i] > 0
    _leader = leader
    _term_changed = term_changed
    _pusher_class = pusher_class
    _group_class = group_class
    _acked_class = acked_class


cdef enum:
    SUCCESS = 200  # Code.SUCCESS
    # a wait's fields, in ``ACKED_FIELDS``' order
    A_DISPATCHER = 0
    A_COUNT = 1
    A_TOLD = 2
    A_N = 3
    # a dispatcher's, in ``PEER_FIELDS``'
    P_PUSHER = 0
    P_PEER = 1
    P_PENDING = 2
    P_WRITE = 3
    P_WAKE = 4
    P_N = 5
    # the pusher's, in ``PUSHER_FIELDS``'
    U_MARKS = 0
    U_MS = 1
    U_STORE = 2
    U_SOON = 3
    U_N = 4
    # the member state's, in ``STATE_FIELDS``'
    S_ROLE = 0
    S_TERM = 1
    S_N = 2

    # the pusher's, in ``QUORUM_FIELDS``' (``check_quorum``)
    Q_MS = 0
    Q_STORE = 1
    Q_WAITERS = 2
    Q_OPEN = 3
    Q_LISTENERS = 4
    Q_N = 5
    # the member state's, in ``SELF_FIELDS``'
    M_TERM = 0
    M_SELF = 1
    M_N = 2
    # the store's, in ``LEDGER_FIELDS``'
    L_END = 0
    L_COMMITTED = 1
    L_N = 2
    # a group's (``AckGroup``), in ``GROUP_FIELDS``'
    G_LAST = 0
    G_TERM = 1
    G_N = 2
    # an ``AckGroup``'s, in ``SETTLE_FIELDS``' (``settle``)
    T_SETTLED = 0
    T_FUTURE = 1
    T_OUTCOME = 2
    T_THEN = 3
    T_N = 4

cdef enum:
    # the pusher's, in ``WAIT_FIELDS``' (``wait_then``)
    W_WAITERS = 0
    W_OPEN = 1
    W_CONFIG = 2
    W_DISPATCHERS = 3
    W_SOON = 4
    W_LOOP = 5
    W_N = 6
    # the open group's, in ``JOIN_FIELDS``'
    J_OUTCOME = 0
    J_TERM = 1
    J_LAST = 2
    J_SETTLED = 3
    J_THEN = 4
    J_N = 5
    # an entry's, in ``KEY_FIELDS``'
    Y_INDEX = 0
    Y_TERM = 1
    Y_N = 2
    # a new group's, in ``NEW_GROUP_FIELDS``' (``group_at``)
    N_TERM = 0
    N_FIRST = 1
    N_LAST = 2
    N_DEADLINE = 3
    N_FUTURE = 4
    N_OUTCOME = 5
    N_ENTRY = 6
    N_THEN = 7
    N_SETTLED = 8

cdef enum:
    MEDIAN_MAX = 16  # the most marks ``median`` sorts in C
    # the store's, in ``COMMIT_FIELDS``' (``update_committed_index``)
    K_END = 0
    K_STATE = 1
    K_COMMITTED = 2
    K_RECENT = 3
    K_BEGIN = 4
    K_POS = 5
    K_RECENT_FIRST = 6
    K_N = 7
    # a kept entry's, in ``ENTRY_FIELDS``'
    E_POS = 0
    E_SIZE = 1
    E_N = 2

cdef tuple ACKED_FIELDS = ("dispatcher", "count", "told")
cdef tuple PEER_FIELDS = ("pusher", "peer", "pending", "write_index", "wake")
cdef tuple PUSHER_FIELDS = ("water_marks", "ms", "store", "_push_soon")
cdef tuple STATE_FIELDS = ("role", "curr_term")
cdef tuple END_FIELDS = ("ledger_end_index",)
cdef tuple QUORUM_FIELDS = ("ms", "store", "waiters", "_open", "commit_listeners")
cdef tuple SELF_FIELDS = ("curr_term", "self_id")
cdef tuple LEDGER_FIELDS = ("ledger_end_index", "committed_index")
cdef tuple GROUP_FIELDS = ("last", "term")
cdef tuple SETTLE_FIELDS = ("settled", "_future", "outcome", "then")
cdef tuple WAIT_FIELDS = ("waiters", "_open", "config", "dispatchers", "_push_soon", "loop")
cdef tuple JOIN_FIELDS = ("outcome", "term", "last", "settled", "then")
cdef tuple KEY_FIELDS = ("index", "term")
cdef tuple NEW_GROUP_FIELDS = ("term", "first", "last", "deadline", "_future", "outcome", "entry",
                               "then", "settled")
cdef ClassOffsets _WAIT = ClassOffsets(WAIT_FIELDS, True)
cdef ClassOffsets _JOIN = ClassOffsets(JOIN_FIELDS)
cdef ClassOffsets _KEY = ClassOffsets(KEY_FIELDS)
cdef ClassOffsets _QUORUM = ClassOffsets(QUORUM_FIELDS, True)
cdef ClassOffsets _SELF = ClassOffsets(SELF_FIELDS, True)
cdef ClassOffsets _LEDGER = ClassOffsets(LEDGER_FIELDS, True)
cdef ClassOffsets _GROUP = ClassOffsets(GROUP_FIELDS, True)
cdef ClassOffsets _SETTLE = ClassOffsets(SETTLE_FIELDS)
cdef tuple COMMIT_FIELDS = ("ledger_end_index", "member_state", "committed_index", "_recent",
                            "ledger_begin_index", "committed_pos", "_recent_first")
cdef tuple ENTRY_FIELDS = ("pos", "size")
cdef ClassOffsets _COMMIT = ClassOffsets(COMMIT_FIELDS, True)
cdef ClassOffsets _ENTRY = ClassOffsets(ENTRY_FIELDS)
cdef ClassOffsets _ACKED = ClassOffsets(ACKED_FIELDS, True)
cdef ClassOffsets _PEER = ClassOffsets(PEER_FIELDS, True)
cdef ClassOffsets _PUSHER = ClassOffsets(PUSHER_FIELDS, True)
cdef ClassOffsets _STATE = ClassOffsets(STATE_FIELDS, True)
cdef ClassOffsets _END = ClassOffsets(END_FIELDS, True)


cdef inline object field(object o, Py_ssize_t* at, int i, tuple names):
    return slot_or_attr(o, at[i], <str>names[i])


cdef object median(dict own):
    """``sorted(own.values(), reverse=True)[len(own) >> 1]``: sorted in C
    for up to ``MEDIAN_MAX`` marks, each an int in int64's range (a group's
    members), else by ``sorted``."""
    cdef int64_t v[MEDIAN_MAX]
    cdef int64_t x
    cdef Py_ssize_t n = len(own), i, j
    cdef int overflow = 0
    if n == 0 or n > MEDIAN_MAX:
        return sorted(own.values(), reverse=True)[n >> 1]
    i = 0
    for mark in own.values():
        if not PyLong_CheckExact(mark):
            return sorted(own.values(), reverse=True)[n >> 1]
        x = PyLong_AsLongLongAndOverflow(mark, &overflow)
        if overflow:
            return sorted(own.values(), reverse=True)[n >> 1]
        j = i  # (insertion, largest first)
        while j > 0 and v[j - 1] < x:
            v[j] = v[j - 1]
            j -= 1
        v[j] = x
        i += 1
    return v[n >> 1]


cdef int settle(object group, object code) except -1:
    """``group.settle(code)``: for an ``AckGroup`` whose quorum holds (``code``
    None) and that has an ``outcome``, its steps here (its fields at their
    slots, no Python frame of its own); any other through the method."""
    cdef Py_ssize_t t[T_N]
    if type(group) is not _group_class or code is not None:
        group.settle(code)
        return 0
    _SETTLE.copy(group, t)
    outcome = field(group, t, T_OUTCOME, SETTLE_FIELDS)
    if outcome is None:
        group.settle(code)
        return 0
    if field(group, t, T_SETTLED, SETTLE_FIELDS):
        return 0
    set_slot_or_attr(group, t[T_SETTLED], "settled", True)
    fut = field(group, t, T_FUTURE, SETTLE_FIELDS)
    value = outcome(code)
    if fut is not None and not fut.done():
        fut.set_result(value)
    waiting = field(group, t, T_THEN, SETTLE_FIELDS)
    if waiting is not None:
        for then in waiting:
            try:
                then(value)
            except Exception:  # one waiter's bug must not stop the rest
                log.exception("quorum waiter failed")
    return 0


def check_quorum(pusher, own=None):
    """``EntryPusher._check_quorum`` (its twin ``rmq.dledger.pusher._check_quorum``):
    commit the median water mark and settle the groups it covers, the
    pusher's, member state's, store's and groups' fields read at their
    slots."""
    quorum(pusher, own)


cdef int quorum(object pusher, object own) except -1:
    """``check_quorum``'s steps (called straight by ``tell_acked`` for an
    ``EntryPusher``)."""
    cdef Py_ssize_t q[Q_N]
    cdef Py_ssize_t m[M_N]
    cdef Py_ssize_t led[L_N]
    cdef Py_ssize_t g[G_N]
    if _term_changed is None:
        raise RuntimeError("dledger_frames.bind_acked was not called")
    _QUORUM.copy(pusher, q)
    ms = field(pusher, q, Q_MS, QUORUM_FIELDS)
    store = field(pusher, q, Q_STORE, QUORUM_FIELDS)
    _SELF.copy(ms, m)
    term = field(ms, m, M_TERM, SELF_FIELDS)
    if own is None:
        own = pusher._marks(term)
    _LEDGER.copy(store, led)
    end = field(store, led, L_END, LEDGER_FIELDS)
    self_id = field(ms, m, M_SELF, SELF_FIELDS)
    if own[self_id] < end:
        own[self_id] = end
    quorum_index = median(own) if type(own) is dict else \
        sorted(own.values(), reverse=True)[len(own) >> 1]
    before = field(store, led, L_COMMITTED, LEDGER_FIELDS)
    if quorum_index > before:
        if type(store) is _store_class:
            commit(store, term, quorum_index)
        else:
            store.update_committed_index(term, quorum_index)
    waiting = field(pusher, q, Q_WAITERS, QUORUM_FIELDS)
    while waiting:
        group = waiting[0]
        _GROUP.copy(group, g)
        if not slot_or_attr(group, g[G_LAST], "last") <= quorum_index:
            break
        group = waiting.popleft()
        _GROUP.copy(group, g)
        if group is field(pusher, q, Q_OPEN, QUORUM_FIELDS):
            set_slot_or_attr(pusher, q[Q_OPEN], "_open", None)
        settle(group, None if slot_or_attr(group, g[G_TERM], "term") == term else _term_changed)
    committed = field(store, led, L_COMMITTED, LEDGER_FIELDS)
    if committed != before:
        for listener in field(pusher, q, Q_LISTENERS, QUORUM_FIELDS):
            listener(committed)
    return 0


def wait_quorum_then(pusher, outcome, first, last, then):
    """The quorum wait of the entries ``first``..``last`` (a DLedger lane's
    read), told to ``then``: ``EntryPusher.wait_quorum(last, first.index,
    outcome, then)`` in one call (its twin
    ``rmq.dledger.pusher._wait_quorum_then``)."""
    wait_then(pusher, outcome, first, last, then)


cdef int wait_then(object pusher, object outcome, object first, object last,
                   object then) except -1:
    """``wait_quorum_then``'s steps, those of ``EntryPusher.wait_quorum``,
    ``_new_group`` and ``_appended_more``: ``then`` joins the open group
    when it has the same ``outcome`` and term, ends before ``last`` and is
    not settled (its last moved to ``last``'s index); else a group is made
    (an ``AckGroup`` in place, without its ``__init__``; the waiters of
    another term failed first, through ``_fail_waiters``), its deadline
    ``time.monotonic() * 1000 + max_wait_ack_time_ms``.  Then the push
    round is asked for once a loop turn (a group of one checks its quorum
    at once).  The pusher's, the groups' and the entries' fields read and
    set at their slots."""
    if _group_class is None:
        raise RuntimeError("dledger_frames.bind_acked was not called")
    cdef Py_ssize_t w[W_N]
    cdef Py_ssize_t j[J_N]
    cdef Py_ssize_t y[Y_N]
    cdef Py_ssize_t g[G_N]
    _KEY.copy(first, y)
    first_index = field(first, y, Y_INDEX, KEY_FIELDS)
    _KEY.copy(last, y)
    index = field(last, y, Y_INDEX, KEY_FIELDS)
    term = field(last, y, Y_TERM, KEY_FIELDS)
    _WAIT.copy(pusher, w)
    group = field(pusher, w, W_OPEN, WAIT_FIELDS)
    if group is not None:
        _JOIN.copy(group, j)
        if field(group, j, J_OUTCOME, JOIN_FIELDS) is outcome and \
                field(group, j, J_TERM, JOIN_FIELDS) == term and \
                field(group, j, J_LAST, JOIN_FIELDS) < index and \
                not field(group, j, J_SETTLED, JOIN_FIELDS):
            set_slot_or_attr(group, j[J_LAST], "last", index)
            thens = field(group, j, J_THEN, JOIN_FIELDS)
            if thens is None:
                set_slot_or_attr(group, j[J_THEN], "then", [then])
            else:
                thens.append(then)
            return appended_more(pusher, w)
    waiting = field(pusher, w, W_WAITERS, WAIT_FIELDS)
    if waiting:
        head = waiting[0]
        _GROUP.copy(head, g)
    if waiting and field(head, g, G_TERM, GROUP_FIELDS) != term:
        fail_other_terms(pusher, term)
        waiting = field(pusher, w, W_WAITERS, WAIT_FIELDS)  # (the groups kept: a new queue)
    deadline = monotonic() * 1000 + field(pusher, w, W_CONFIG, WAIT_FIELDS).max_wait_ack_time_ms
    if group_in_place:
        group = new_instance(_group_class)
        set_slot_at_offset(group, group_at[N_TERM], term)
        set_slot_at_offset(group, group_at[N_FIRST], first_index)
        set_slot_at_offset(group, group_at[N_LAST], index)
        set_slot_at_offset(group, group_at[N_DEADLINE], deadline)
        set_slot_at_offset(group, group_at[N_FUTURE], None)
        set_slot_at_offset(group, group_at[N_OUTCOME], outcome)
        set_slot_at_offset(group, group_at[N_ENTRY], last)
        set_slot_at_offset(group, group_at[N_THEN], [then])
        set_slot_at_offset(group, group_at[N_SETTLED], False)
    else:
        group = _group_class(last, first_index, deadline, outcome)
        group.then = [then]
    waiting.append(group)
    set_slot_or_attr(pusher, w[W_OPEN], "_open", group)
    return appended_more(pusher, w)


cdef int fail_other_terms(object pusher, object term) except -1:
    """The groups of a term other than ``term`` failed with TERM_CHANGED,
    as the ack checker does (rare; a function of its own: the predicate's
    closure is made only here, not on every wait)."""
    pusher._fail_waiters(lambda g: g.term != term, _term_changed)
    return 0


cdef int appended_more(object pusher, Py_ssize_t* w) except -1:
    """``EntryPusher._appended_more``: a group of one checks its quorum now;
    else the push round is called soon, once a loop turn."""
    if not field(pusher, w, W_DISPATCHERS, WAIT_FIELDS):
        if type(pusher) is _pusher_class:
            quorum(pusher, None)
        else:
            pusher._check_quorum()
    elif not field(pusher, w, W_SOON, WAIT_FIELDS):
        set_slot_or_attr(pusher, w[W_SOON], "_push_soon", True)
        field(pusher, w, W_LOOP, WAIT_FIELDS).call_soon(pusher._push_round)
    return 0


cdef int tell_acked(object wait, const uint8_t* text, Py_ssize_t n, object buf,
                    Py_ssize_t body, Py_ssize_t frame_end) except -1:
    """``_Acked.tell`` of the answer ``text[:n]`` (``buf[body:frame_end]``),
    step for step; its failure logged, not raised."""
    cdef int64_t code, term, index
    cdef bint has_index
    cdef Py_ssize_t a[A_N]
    cdef Py_ssize_t p[P_N]
    cdef Py_ssize_t u[U_N]
    cdef Py_ssize_t s[S_N]
    cdef Py_ssize_t e[1]
    if not answer_fields(text, n, &code, &term, &index, &has_index) or code != SUCCESS:
        wait.tell(buf[body:frame_end])
        return 0
    # (the offsets copied: an attribute read may run code that meets other classes)
    _ACKED.copy(wait, a)
    set_slot_or_attr(wait, a[A_TOLD], "told", True)
    try:
        d = field(wait, a, A_DISPATCHER, ACKED_FIELDS)
        _PEER.copy(d, p)
        if not has_index:
            index = -1
        pending = field(d, p, P_PENDING, PEER_FIELDS)
        if type(pending) is dict:  # (no method call: a dict's pop in C)
            (<dict>pending).pop(index, None)
        else:
            pending.pop(index, None)
        pusher = field(d, p, P_PUSHER, PEER_FIELDS)
        _PUSHER.copy(pusher, u)
        # EntryPusher.update_water_mark(term, d.peer, index + count - 1)
        term_obj = term
        peer = field(d, p, P_PEER, PEER_FIELDS)
        mark = index + field(wait, a, A_COUNT, ACKED_FIELDS) - 1
        marks = field(pusher, u, U_MARKS, PUSHER_FIELDS)
        marks = (<dict>marks).get(term_obj) if type(marks) is dict else marks.get(term_obj)
        if marks is None:
            marks = pusher._marks(term_obj)
        if marks[peer] < mark:
            marks[peer] = mark
            ms = field(pusher, u, U_MS, PUSHER_FIELDS)
            _STATE.copy(ms, s)
            if field(ms, s, S_ROLE, STATE_FIELDS) is _leader and \
                    term_obj == field(ms, s, S_TERM, STATE_FIELDS):
                if type(pusher) is _pusher_class:
                    quorum(pusher, marks)
                else:
                    pusher._check_quorum(marks)
        store = field(pusher, u, U_STORE, PUSHER_FIELDS)
        _END.copy(store, e)
        if field(d, p, P_WRITE, PEER_FIELDS) <= slot_or_attr(store, e[0], "ledger_end_index") \
                and not field(pusher, u, U_SOON, PUSHER_FIELDS):
            # pushes held back (MAX_PENDING in flight); while a push round is
            # due, that round pushes them (or wakes it)
            field(d, p, P_WAKE, PEER_FIELDS).set()
    except Exception:  # one push's answer must not stop the connection's read
        log.exception("push answer failed")
    return 0


cdef class PushAnswers:
    """The frame lane of a ``PeerClient``'s connections (the twin:
    ``rmq.dledger.rpc.PyPushAnswers``): the leading frames of a read that
    answer raw-frame requests of the response table (instances of
    ``wait_type``, ``FrameWait``), each body told to its wait; the first
    other frame, and what follows it, go the general way.  Compiled, a
    follower's answer costs the leader no Python frame of the lane's."""

    cdef dict responses
    cdef Py_ssize_t max_frame
    cdef object wait_type

    def __init__(self, dict responses not None, Py_ssize_t max_frame, wait_type) -> None:
        self.responses = responses
        self.max_frame = max_frame
        self.wait_type = wait_type

    def serve(self, channel, buf, Py_ssize_t pos, Py_ssize_t end):
        """(the position of the first frame left to the general way, None)."""
        cdef Py_buffer pb
        cdef int64_t opaque
        cdef Py_ssize_t body, frame_end
        cdef dict responses = self.responses
        PyObject_GetBuffer(buf, &pb, PyBUF_SIMPLE)
        try:
            if end > pb.len:
                return pos, None
            while pos < end:
                if not _answer(<const uint8_t*>pb.buf, pos, end, self.max_frame, &opaque, &body,
                               &frame_end):
                    break
                key = opaque
                entry = responses.get(key)
                if entry is None or not isinstance(entry[0], self.wait_type):
                    break
                del responses[key]
                pos = frame_end
                wait = entry[0]
                if type(wait) is _acked_class:
                    tell_acked(wait, <const uint8_t*>pb.buf + body, frame_end - body, buf, body,
                               frame_end)
                else:
                    wait.tell(buf[body:frame_end])
        finally:
            PyBuffer_Release(&pb)
        return pos, None

    def served(self) -> list:
        return []
