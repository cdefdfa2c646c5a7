# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twins of what a send-lane read tells about the queues it stored
into (``RunQueue.summary`` tuples, "runs"): the store's statistics per topic
(``put_counts``, twin of ``rmq.broker.send_lane._put_counts``) and the
broker's arrival notice (``on_runs``, twin of
``rmq.broker.controller._on_runs``: the put counts of the broker statistics,
then the listeners that have something to do).

The Java Producer's load meets a new queue with nearly every message, so a
read of six sends is six runs: in Python each run costs a tuple unpack, a
dict look-up and a few list updates, twice, inside three function frames.
Here both walks are loops in C over the same objects; the Python objects
they update and the listeners they call are the same, in the same order.
The compiled send lane calls them without a Python call (lane_runs.pxd):
``c_put_counts``, and ``counted_walk`` when its counted listener is
``on_counted_runs`` bound to a controller -- after ``forms_want`` told that
a read of one topic with no held pull has a listener to hear it at all (a
produce-only read then makes no runs).
"""

from cpython.dict cimport PyDict_GetItem
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_AsLongAndOverflow
from cpython.object cimport PyObject
from cpython.tuple cimport PyTuple_GET_ITEM

from rmq._fast.arrival cimport waiting
from rmq._fast.put_pending cimport add_to_row
from rmq._fast.store_stats cimport PutCounters, counters_of


cdef inline int _count(stats, topic, long long nums, long long size,
                       long long puts) except -1:
    """``stats.on_puts``, without a Python call for the compiled counters."""
    cdef PutCounters counters = counters_of(stats)
    if counters is not None:
        return counters.count_puts(topic, nums, size, puts)
    stats.on_puts(topic, nums, size, puts)
    return 0


def put_counts(stats, list runs not None):
    """``stats.on_puts`` once per topic of ``runs`` (first-met order), with
    the topic's messages, bytes and puts summed; the messages in all."""
    return c_put_counts(stats, runs)


cdef long long c_put_counts(stats, list runs) except -1:
    """``put_counts``, called by the compiled send lane without a Python call."""
    cdef Py_ssize_t n = PyList_GET_SIZE(runs), i
    cdef tuple run
    cdef long long nums, size, events, served = 0
    cdef dict totals
    cdef list t
    if n == 0:
        return 0
    run = <tuple>PyList_GET_ITEM(runs, 0)
    topic = <object>PyTuple_GET_ITEM(run, 0)
    nums = <object>PyTuple_GET_ITEM(run, 5)
    size = <object>PyTuple_GET_ITEM(run, 6)
    events = <object>PyTuple_GET_ITEM(run, 7)
    for i in range(1, n):  # one topic (the common case): summed in C, as C numbers
        run = <tuple>PyList_GET_ITEM(runs, i)
        other = <object>PyTuple_GET_ITEM(run, 0)
        if other is not topic and other != topic:
            break
        nums += <long long><object>PyTuple_GET_ITEM(run, 5)
        size += <long long><object>PyTuple_GET_ITEM(run, 6)
        events += <long long><object>PyTuple_GET_ITEM(run, 7)
    else:
        _count(stats, topic, nums, size, events)
        return nums
    totals = {}
    for i in range(n):
        run = <tuple>PyList_GET_ITEM(runs, i)
        topic = <object>PyTuple_GET_ITEM(run, 0)
        found = totals.get(topic)
        if found is None:
            totals[topic] = [<object>PyTuple_GET_ITEM(run, 5), <object>PyTuple_GET_ITEM(run, 6),
                             <object>PyTuple_GET_ITEM(run, 7)]
        else:
            t = <list>found
            t[0] += <object>PyTuple_GET_ITEM(run, 5)
            t[1] += <object>PyTuple_GET_ITEM(run, 6)
            t[2] += <object>PyTuple_GET_ITEM(run, 7)
    for topic, t in totals.items():
        _count(stats, topic, t[0], t[1], t[2])
        served += <long long>t[0]
    return served


def on_runs(stats, list forms not None, list runs not None):
    """``stats.inc_put_runs(runs)`` (``BrokerStats``), then each arrival
    listener of ``forms`` (``BrokerController._runs_forms``) that has
    something to do, as ``rmq.broker.controller._on_runs`` does."""
    walk(stats, forms, runs, False)


def on_counted_runs(stats, list forms not None, list runs not None):
    """``on_runs`` for a send lane that counted the puts of the runs that
    list none (``stats.inc_put_runs(runs, True)``)."""
    walk(stats, forms, runs, True)


cdef int counted_walk(stats, list forms, list runs) except -1:
    """``on_counted_runs``, called by the compiled send lane without a Python
    call when its counted listener is ``on_counted_runs`` bound to a
    controller's statistics and forms."""
    walk(stats, forms, runs, True)
    return 0


cdef bint forms_want(list forms, topic) except -1:
    """Some listener of ``forms`` would be called by ``on_counted_runs`` for
    runs of ``topic`` alone that list no puts (True also for one without a
    runs form, which hears each run): else its walk would do nothing."""
    cdef Py_ssize_t at = -1
    cdef tuple form
    for form in forms:
        at += 1
        if <object>PyTuple_GET_ITEM(form, 1) is None:
            return True
        holder = <object>PyTuple_GET_ITEM(form, 2)
        if holder is not None and not waiting(holder, <object>PyTuple_GET_ITEM(form, 3), at):
            continue
        topics = <object>PyTuple_GET_ITEM(form, 4)
        if topics is not None and topic not in topics:
            continue
        return True
    return False


# The pending row of each queue id below ROWS_N last met, as (table, topic,
# row): a run whose stats table and topic are the same objects again (a
# reput walk keeps its topics' strs from walk to walk) adds to the row
# without making the (topic, queue id) key and looking it up -- the tuple's
# hash and the key compare are most of a run's count.  Sound because
# BrokerStats swaps ``_put_pending`` for a new dict at a fold and never
# removes or replaces a row of the live one; the table and the topic are
# held, so no other object takes their identity.
cdef enum:
    ROWS_N = 64
cdef list _rows = [None] * ROWS_N


cdef object run_row(dict pending, topic, queue_id):
    """The row of queue (``topic``, ``queue_id``) in the table ``pending``,
    or None (a queue not counted since the last fold)."""
    cdef int ovf = 0
    cdef long q = -1
    cdef tuple last
    if type(queue_id) is int:
        q = PyLong_AsLongAndOverflow(queue_id, &ovf)
    if q < 0 or q >= ROWS_N or ovf:
        q = -1
    if q >= 0:
        last = <tuple>_rows[q]
        if last is not None and <object>PyTuple_GET_ITEM(last, 0) is pending and \
                <object>PyTuple_GET_ITEM(last, 1) is topic:
            return <object>PyTuple_GET_ITEM(last, 2)
    cdef PyObject* found = PyDict_GetItem(pending, (topic, queue_id))
    if found == NULL:
        return None
    if q >= 0:
        _rows[q] = (pending, topic, <object>found)
    return <object>found


cdef bint any_topic_in(list runs, topics) except -1:
    """Some run of ``runs`` is of a topic in ``topics`` (each topic asked
    once for runs of it in a row)."""
    last = None
    for run in runs:
        topic = <object>PyTuple_GET_ITEM(<tuple>run, 0)
        if topic is last:
            continue
        if topic in topics:
            return True
        last = topic
    return False


cdef walk(stats, list forms, list runs, bint counted):
    cdef Py_ssize_t n = PyList_GET_SIZE(runs), i
    cdef tuple run
    cdef dict pending_of = None  # (read once a run needs it: a lane's counted runs do not)
    cdef long long added = 0
    inc_put = None
    for i in range(n):
        run = <tuple>PyList_GET_ITEM(runs, i)
        each = <object>PyTuple_GET_ITEM(run, 8)
        if each is None and counted:
            continue  # (by the send lane, put_total included)
        topic = <object>PyTuple_GET_ITEM(run, 0)
        queue_id = <object>PyTuple_GET_ITEM(run, 1)
        if each is not None:
            if inc_put is None:
                inc_put = stats.inc_put
            for put in each:
                inc_put(topic, queue_id, put[3], put[4], 1)
            continue
        nums = <object>PyTuple_GET_ITEM(run, 5)
        size = <object>PyTuple_GET_ITEM(run, 6)
        events = <object>PyTuple_GET_ITEM(run, 7)
        if pending_of is None:
            pending_of = stats._put_pending
        if add_to_row(run_row(pending_of, topic, queue_id), nums, size, events):
            added += <long long>nums
            continue
        if inc_put is None:  # a new key, or the size histogram
            inc_put = stats.inc_put
        inc_put(topic, queue_id, nums, size, events)
    if added:
        stats.put_total += added
    cdef Py_ssize_t at = -1
    for form in forms:
        at += 1
        listener, runs_form, holder, attr, topics = <tuple>form
        if runs_form is None:
            for run in runs:
                each = run[8]
                if each is None:
                    listener(run[0], run[1], run[2], run[3], run[4])
                else:
                    for put in each:
                        listener(run[0], run[1], put[0], put[1], put[2])
            continue
        if holder is not None and not waiting(holder, attr, at):
            continue  # nobody waits (read at its slot: arrival.waiting)
        if topics is not None and not any_topic_in(runs, topics):
            continue  # none of its topics
        runs_form(runs)
