# cython: language_level=3
"""Compiled twin of ``_ack_entry_now`` in rmq/broker/processor/ack.py: one
entry of a BATCH_ACK_MESSAGE -- its fields read, its queue checked, its
bitset's offsets, its ack record stored and applied -- step for step in one
call; the bitset is read here (what ``bitset_offsets`` gives), the record
goes through the revive service's ``write_now``.  The classes and functions
of the layers above are handed over by ``bind``.
"""

from binascii import a2b_base64

cdef object _EXTRA = None
cdef object _ACK = None
cdef object _real_topic = None
cdef object _SYSTEM_ERROR = None
cdef object _ORDER_QID = None
cdef bint _bound = False


def bind(extra_type: type, ack_type: type, real_topic: object, system_error: object,
         order_qid: object) -> None:
    """ExtraInfo, AckMsg, ``pop_records.real_topic``, ResponseCode.SYSTEM_ERROR
    and the orderly pops' revive queue id."""
    global _EXTRA, _ACK, _real_topic, _SYSTEM_ERROR, _ORDER_QID, _bound
    _EXTRA = extra_type
    _ACK = ack_type
    _real_topic = real_topic
    _SYSTEM_ERROR = system_error
    _ORDER_QID = order_qid
    _bound = True


cdef list bitset_offsets(object start, object data):
    """``ack.bitset_offsets``: the offsets whose bit is set, lowest first."""
    raw = a2b_base64(data) if data else b""
    cdef const unsigned char[:] bits = raw
    cdef Py_ssize_t i, n = len(raw)
    cdef int bit
    cdef unsigned char byte
    cdef list out = []
    for i in range(n):
        byte = bits[i]
        if byte:
            for bit in range(8):
                if byte >> bit & 1:
                    out.append(start + (i * 8 + bit))
    return out


def ack_entry_now(p, a, broker_name):
    """``_ack_entry_now`` of rmq/broker/processor/ack.py, step for step."""
    if not _bound:
        raise RuntimeError("ack_entry.bind was not called")
    try:
        group, retry = str(a["c"]), str(a.get("r", "0"))
        topic = _real_topic(str(a["t"]), group, retry)
        queue_id, start = int(a["q"]), int(a["so"])
        info = _EXTRA(start, int(a["pt"]), int(a.get("it", 0)), int(a["rq"]), retry,
                      broker_name, queue_id, start)
        offsets = bitset_offsets(start, a.get("b") or "")
    except (KeyError, ValueError, TypeError) as exc:
        return _SYSTEM_ERROR, f"bad batch ack entry: {exc}"
    refused = p._check_queue(topic, queue_id, None)
    if refused is not None:
        return refused.code, refused.remark
    if not offsets:
        return None
    revive = p.ctx.revive
    qid = info.revive_qid
    if qid == _ORDER_QID:
        return group, topic, queue_id, info, offsets
    if not 0 <= qid < revive.queue_num:
        return None
    ack = _ACK(topic, group, queue_id, start, info.pop_time, broker_name, offsets)
    if revive.write_now(qid, ack) is None:
        return group, topic, queue_id, info, offsets
    return None
