# cython: language_level=3
"""Compiled twin of ``BrokerController._on_message_arriving`` (rmq/broker/
controller.py): the store's listener of each single put -- a revive record
of every pop and every ack, a plain send -- counts the put and tells the
listeners that have something to do, without the interpreter's frame and
loop (set on the class when built).  The count is ``BrokerStats.inc_put``'s
common case done here (a queue already counted, no size histogram), as
``rmq._fast.lane_runs.on_runs`` does it for a send lane's read.
"""

from rmq._fast.put_pending cimport add_pending


def on_message_arriving(controller, topic, queue_id, next_offset, tags_code, store_ts,
                        nums=1, size=0, events=1):
    """``BrokerController._on_message_arriving``, step for step."""
    stats = controller.stats
    if add_pending(stats._put_pending, (topic, queue_id), nums, size, events):
        stats.put_total += nums
    else:  # a new key, or the size histogram
        stats.inc_put(topic, queue_id, nums, size, events)
    cdef tuple form
    for form in <list>controller._runs_forms:
        holder = form[2]
        if holder is not None and not getattr(holder, form[3]):
            continue  # nobody waits: the listener would return at once
        topics = form[4]
        if topics is not None and topic not in topics:
            continue  # none of its topics: likewise
        form[0](topic, queue_id, next_offset, tags_code, store_ts)
