# cython: language_level=3
# A topic's config read from the topic config manager's table without a
# method call, for the compiled pop and ack pieces.


cdef inline object topic_config(object tcm, str topic):
    """``TopicConfigManager.select_topic_config``: the table's entry, the
    manager asked only where it may make one (LMQ)."""
    return table_config(<dict>tcm.table, tcm, topic)


cdef inline object table_config(dict table, object tcm, str topic):
    """``topic_config`` of ``tcm`` whose table, ``table``, the caller read
    (once for the several topics of a pop)."""
    tc = table.get(topic)
    if tc is None and tcm.lmq:
        return tcm.select_topic_config(topic)
    return tc
