# cython: language_level=3
# A consumer group's committed offsets read and moved in the offset
# manager's table (``ConsumerOffsetManager.offset_table``: "topic@group" ->
# {queueId: offset}) without a method call, for the compiled pop and revive
# pieces; where the manager does more than that (LMQ groups kept apart, a
# move backwards it logs, a key not in the table yet, a stand-in without the
# table) its own method runs.

from libc.string cimport memcpy


cdef extern from "Python.h":
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    void *PyUnicode_DATA(object o)
    int PyUnicode_IS_ASCII(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)


cdef inline str offset_key(str topic, str group):
    """``topic + "@" + group``, the table's key: ASCII names written into
    one text (not two concatenations)."""
    cdef Py_ssize_t tl, gl
    cdef char *o
    if not (PyUnicode_IS_ASCII(topic) and PyUnicode_IS_ASCII(group)):
        return topic + "@" + group
    tl = PyUnicode_GET_LENGTH(topic)
    gl = PyUnicode_GET_LENGTH(group)
    key = PyUnicode_New(tl + 1 + gl, 127)
    o = <char *>PyUnicode_DATA(key)
    memcpy(o, PyUnicode_DATA(topic), tl)
    o[tl] = 64  # '@'
    memcpy(o + tl + 1, PyUnicode_DATA(group), gl)
    return key


cdef inline object offsets_of(object com, str group, str topic):
    """The table's entry of ``group`` on ``topic`` ({queueId: offset}), None
    when there is none yet, False where the manager's own methods are to run
    (a stand-in without the table, LMQ groups kept apart): what
    ``offset_in`` and ``commit_in`` take, read once for a queue's query and
    commit (nothing in between may replace the entry: no other code runs)."""
    table = getattr(com, "offset_table", None)
    if type(table) is not dict or com.lmq:
        return False
    return (<dict>table).get(offset_key(topic, group))


cdef inline object offset_in(object com, object queues, str group, str topic, object qid):
    """``ConsumerOffsetManager.query_offset``, of ``queues`` (``offsets_of``)."""
    if queues is False:
        return com.query_offset(group, topic, qid)
    if queues is None:
        return -1
    return (<dict>queues).get(qid, -1)


cdef inline object commit_in(object com, object queues, str client, str group, str topic,
                             object qid, object offset):
    """``ConsumerOffsetManager.commit_offset``, in ``queues``
    (``offsets_of``) where it moves forward there; else the manager's (a
    key to add, a move backwards it logs)."""
    cdef object prev
    if type(queues) is dict:
        prev = (<dict>queues).get(qid)
        if prev is None or not offset < prev:
            (<dict>queues)[qid] = offset
            return None
    com.commit_offset(client, group, topic, qid, offset)
    return None

