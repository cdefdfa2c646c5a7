# cython: language_level=3
# A consumer group's committed offsets read and moved in the offset
# manager's table (``ConsumerOffsetManager.offset_table``: "topic@group" ->
# {queueId: offset}) without a method call, for the compiled pop and revive
# pieces; where the manager does more than that (LMQ groups kept apart, a
# move backwards it logs, a key not in the table yet, a stand-in without the
# table) its own method runs.


cdef inline object query_offset(object com, str group, str topic, object qid):
    """``ConsumerOffsetManager.query_offset``."""
    table = getattr(com, "offset_table", None)
    if type(table) is not dict or com.lmq:
        return com.query_offset(group, topic, qid)
    queues = (<dict>table).get(topic + "@" + group)
    if queues is None:
        return -1
    return (<dict>queues).get(qid, -1)


cdef inline object commit_offset(object com, str client, str group, str topic, object qid,
                                 object offset):
    """``ConsumerOffsetManager.commit_offset``."""
    table = getattr(com, "offset_table", None)
    if type(table) is dict and not com.lmq:
        queues = (<dict>table).get(topic + "@" + group)
        if queues is not None:
            prev = (<dict>queues).get(qid)
            if prev is None or not offset < prev:
                (<dict>queues)[qid] = offset
                return None
    com.commit_offset(client, group, topic, qid, offset)
    return None
