# cython: language_level=3
"""Compiled twin of ``BrokerController._on_message_arriving`` (rmq/broker/
controller.py): the store's listener of each single put -- a revive record
of every pop and every ack, a plain send -- counts the put and tells the
listeners that have something to do, without the interpreter's frame and
loop (set on the class when built).  The count is ``BrokerStats.inc_put``'s
common case done here (a queue already counted, no size histogram), as
``rmq._fast.lane_runs.on_runs`` does it for a send lane's read.

``arrive`` is its body for the controller's stats and listener forms (both
made once with the controller, as its ``runs_listener`` binds them): the
compiled single put (``rmq._fast.store_put``) calls it straight, without a
Python call and its argument parsing, when the store's listener is this
function bound to a controller.
"""

from types import MemberDescriptorType

from cpython.long cimport PyLong_AsLongAndOverflow

from rmq._fast.known_hash cimport dict_get_known
from rmq._fast.put_pending cimport add_to_row
from rmq._fast.slots cimport set_slot_or_attr, slot_offset, slot_offsets, slot_or_attr

# BrokerStats' ``_put_pending`` and ``put_total`` read and set at their slots
# (~190 and ~340 instructions through the attribute protocol), for the last
# stats class met; any other, and an unset slot, through the attributes
cdef object _stats_class = None
cdef Py_ssize_t _stats_at[2]  # _put_pending, put_total
_STATS_FIELDS = ("_put_pending", "put_total")

# The pending row last found of each queue id below ROWS_N, as (table, key,
# row): a put whose stats table and (topic, queue id) key are the same
# objects again (the single put keeps a queue's key: ``store_put.queue_key``)
# adds to the row without the table lookup, whose key compare is most of a
# put's count.  Sound because BrokerStats swaps ``_put_pending`` for a new
# dict at a fold and never removes or replaces a row of the live one; the
# table and the key are held, so no other object takes their identity.
cdef enum:
    ROWS_N = 32
cdef list _rows = [None] * ROWS_N


cdef object pending_row(dict pending, tuple key, Py_hash_t key_hash):
    """The row of queue ``key`` (of hash ``key_hash``) in the table
    ``pending``, or None (a queue not counted since the last fold)."""
    cdef int ovf = 0
    cdef long q = -1
    cdef tuple last
    qid = key[1]
    if type(qid) is int:
        q = PyLong_AsLongAndOverflow(qid, &ovf)
    if 0 <= q < ROWS_N and not ovf:
        last = <tuple>_rows[q]
        if last is not None and last[0] is pending and last[1] is key:
            return last[2]
    found = dict_get_known(pending, key, key_hash)
    if found == NULL:
        return None
    if 0 <= q < ROWS_N and not ovf:
        _rows[q] = (pending, key, <object>found)
    return <object>found


# Where each listener form's ``waiting`` attribute lies (``slot_offset``;
# -1: read through the attribute), for the class and name last met at that
# place of the controller's forms: the broker's holders (PopPolling,
# PullRequestHoldService, HAService) slot them, so that a put that nobody
# waits for costs a slot read per such listener, not an attribute lookup.
cdef enum:
    FORMS_N = 16
cdef list _form_keys = [None] * FORMS_N  # (class, name) or None
cdef Py_ssize_t _form_at[FORMS_N]


cdef object waiting(object holder, str name, Py_ssize_t i):
    """``getattr(holder, name)`` of the form at place ``i``."""
    cdef Py_ssize_t at = -1
    cdef tuple last
    if i < FORMS_N:
        last = <tuple>_form_keys[i]
        if last is None or last[0] is not type(holder) or last[1] is not name:
            _form_at[i] = slot_offset(type(holder), name, MemberDescriptorType, True)
            _form_keys[i] = (type(holder), name)
        at = _form_at[i]
    return slot_or_attr(holder, at, name)


cdef int arrive(object stats, list forms, tuple key, Py_hash_t key_hash, object next_offset,
                object tags_code, object store_ts, object nums, object size,
                object events) except -1:
    """``on_message_arriving`` of a controller whose ``stats`` and
    ``_runs_forms`` these are, for the queue ``key`` (topic, queue id) of
    hash ``key_hash`` (the single put keeps both for a queue it puts to)."""
    topic = key[0]
    queue_id = key[1]
    global _stats_class
    if type(stats) is not _stats_class:
        slot_offsets(type(stats), _STATS_FIELDS, _stats_at, MemberDescriptorType, True)
        _stats_class = type(stats)
    # (the offset in a local: an attribute read may run code that walks other classes)
    cdef Py_ssize_t at_total = _stats_at[1]
    if add_to_row(pending_row(slot_or_attr(stats, _stats_at[0], "_put_pending"), key, key_hash),
                  nums, size, events):
        set_slot_or_attr(stats, at_total, "put_total",
                         slot_or_attr(stats, at_total, "put_total") + nums)
    else:  # a new key, or the size histogram
        stats.inc_put(topic, queue_id, nums, size, events)
    cdef tuple form
    cdef Py_ssize_t i = -1
    for form in forms:
        i += 1
        holder = form[2]
        if holder is not None and not waiting(holder, form[3], i):
            continue  # nobody waits: the listener would return at once
        topics = form[4]
        if topics is not None and topic not in topics:
            continue  # none of its topics: likewise
        form[0](topic, queue_id, next_offset, tags_code, store_ts)
    return 0


def on_message_arriving(controller, topic, queue_id, next_offset, tags_code, store_ts,
                        nums=1, size=0, events=1):
    """``BrokerController._on_message_arriving``, step for step."""
    key = (topic, queue_id)
    arrive(controller.stats, controller._runs_forms, key, hash(key), next_offset, tags_code,
           store_ts, nums, size, events)
