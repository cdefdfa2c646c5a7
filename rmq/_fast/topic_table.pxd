# cython: language_level=3
# A topic's config read from the topic config manager's table without a
# method call, for the compiled pop and ack pieces.


cdef inline object topic_config(object tcm, str topic):
    """``TopicConfigManager.select_topic_config``: the table's entry, the
    manager asked only where it may make one (LMQ)."""
    tc = (<dict>tcm.table).get(topic)
    if tc is None and tcm.lmq:
        return tcm.select_topic_config(topic)
    return tc
