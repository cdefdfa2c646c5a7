"""What every message-writing processor shares (``AbstractSendMessageProcessor``
of 4.9.8): the send request header in both spellings, the topic checks with
auto-creation (``msgCheck``), the store-result -> response mapping and the
send response with ``MSG_REGION``/``TRACE_ON``.

The send header is parsed by hand rather than through a ``CommandHeader``
dataclass: it is decoded once per message on the hottest path of the broker.
"""

from __future__ import annotations

import random
from typing import Any

from rmq.common import message as mc
from rmq.common import timer as tm
from rmq.common import topics as T
from rmq.common.codes import ResponseCode
from rmq.common.protocol.header import invalid_value
from rmq.common.topic_config import TopicConfig
from rmq.remoting import Channel, RemotingCommand
from rmq.remoting.command import RPC_RESPONSE
from rmq.remoting.exceptions import RemotingCommandError
from rmq.store import PutMessageResult, PutMessageStatus
from rmq.store.timer.hook import parse_java_long

RC = ResponseCode
FAQ_SUFFIX = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
# MQVersion V3_4_9: from this client version on maxReconsumeTimes is honoured
V3_4_9 = 121
DLQ_NUMS_PER_GROUP = 1

V1_KEYS = ("producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId",
           "sysFlag", "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode",
           "maxReconsumeTimes", "batch", "bname")
# Java's Integer and Long ranges: the header's int fields and bornTimestamp
_INT_RANGE = range(-(2**31), 2**31)
_LONG_RANGE = range(-(2**63), 2**63)
V2_KEYS = ("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n")


class SendHeader:
    """``SendMessageRequestHeader`` (V2 letters mapped back to V1 names)."""

    __slots__ = ("producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId",
                 "sysFlag", "bornTimestamp", "flag", "properties", "reconsumeTimes",
                 "unitMode", "maxReconsumeTimes", "batch", "bname")


# (index in the keys, range) of the five required numbers
_REQUIRED_NUMBERS = ((3, _INT_RANGE), (4, _INT_RANGE), (5, _INT_RANGE), (6, _LONG_RANGE),
                     (7, _INT_RANGE))


def _int_or_none(text: str | None, valid: range = _INT_RANGE) -> int | None:
    """``Integer.parseInt`` of an optional field: None when absent, not a
    number or outside Java's range (a V1 header leaves such a field null)."""
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value in valid else None


def _required_ints(get, keys: tuple[str, ...]) -> list[int]:
    """The five required numbers, naming the first one missing, unparsable or
    out of Java's range (4.9.8 answers those with SYSTEM_ERROR too, from a
    NumberFormatException or a NullPointerException later on)."""
    nums = []
    for i, valid in _REQUIRED_NUMBERS:
        text = get(keys[i])
        if text is None:
            raise RemotingCommandError(f"the custom field {keys[i]} is null")
        v = _int_or_none(text, valid)
        if v is None:
            raise invalid_value(keys[i], text)
        nums.append(v)
    return nums


def parse_send_header(ext: dict[str, str] | None, keys: tuple[str, ...]) -> SendHeader:
    """Java decoding rules: a missing required field is an error, and so is a
    required number that does not parse or is outside Java's range; such an
    optional number stays None; booleans are ``Boolean.parseBoolean``."""
    if ext is None:
        raise RemotingCommandError(f"the custom field {keys[0]} is null")
    get = ext.get
    h = SendHeader()
    g, t, dt = get(keys[0]), get(keys[1]), get(keys[2])
    if g is None or t is None or dt is None:
        missing = keys[0] if g is None else keys[1] if t is None else keys[2]
        raise RemotingCommandError(f"the custom field {missing} is null")
    h.producerGroup, h.topic, h.defaultTopic = g, t, dt
    h.defaultTopicQueueNums, h.queueId, h.sysFlag, h.bornTimestamp, h.flag = \
        _required_ints(get, keys)
    h.properties = get(keys[8])
    h.reconsumeTimes = _int_or_none(get(keys[9]))
    u = get(keys[10])
    h.unitMode = u is not None and u.lower() == "true"
    h.maxReconsumeTimes = _int_or_none(get(keys[11]))
    b = get(keys[12])
    h.batch = b is not None and b.lower() == "true"
    h.bname = get(keys[13])
    return h


def _strict_int(text: object) -> int | None:
    """An ASCII ``-?[0-9]{1,18}`` string as int, else None: the numbers the fast
    path takes (anything else goes through ``parse_send_header``)."""
    if type(text) is not str or not 0 < len(text) <= 19 or not text.isascii():
        return None
    digits = text[1:] if text[0] == "-" else text
    if not 0 < len(digits) <= 18 or not digits.isdigit():
        return None
    return int(text)


def _parse_single(ext: dict[str, str] | None, keys: tuple[str, ...]) -> tuple | None:
    """The fields a plain single send needs, or None when anything is unusual
    (a field missing, not a plain number, or an int field outside Java's
    int range): ``(topic, queueId, sysFlag,
    bornTimestamp, flag, properties, reconsumeTimes)``, reconsumeTimes 0
    when absent.  (The compiled send lane reads the same fields from the
    frame's bytes.)"""
    if type(ext) is not dict:
        return None
    get = ext.get
    topic = get(keys[1])
    if type(topic) is not str or get(keys[0]) is None or get(keys[2]) is None:
        return None
    nums = []
    for i in (3, 4, 5, 6, 7):
        v = _strict_int(get(keys[i]))
        if v is None or (i != 6 and v not in _INT_RANGE):
            return None
        nums.append(v)
    props = get(keys[8])
    if props is not None and type(props) is not str:
        return None
    rt = get(keys[9])
    reconsume = 0
    if rt is not None:
        reconsume = _strict_int(rt)
        if reconsume is None or reconsume not in _INT_RANGE:
            return None
    return topic, nums[1], nums[2], nums[3], nums[4], props, reconsume


def parse_host(addr: str) -> tuple[str, int]:
    """``ip:port`` (IPv6 addresses keep their colons) -> (ip, port)."""
    ip, _, port = addr.rpartition(":")
    try:
        return ip.strip("[]"), int(port)
    except ValueError:
        return addr, 0


def channel_host(channel: Channel) -> tuple[str, int]:
    """The peer as a host tuple, computed once per connection."""
    attrs = channel.attrs
    host = attrs.get("born_host")
    if host is None:
        host = attrs["born_host"] = parse_host(channel.remote_addr)
    return host


def random_queue_id(n: int) -> int:
    return random.randrange(99999999) % n if n > 0 else 0


class SendSupport:
    """Checks and answers shared by the send, send-back and reply processors."""

    def __init__(self, controller: Any) -> None:
        self.c = controller
        self.bc = controller.broker_config
        self.topics = controller.topic_config_manager
        self.groups = controller.subscription_group_manager

    # ---- responses --------------------------------------------------------------
    def response(self, code: int, remark: str | None = None,
                 ext: dict[str, str] | None = None) -> RemotingCommand:
        """A send response: MSG_REGION and TRACE_ON are always present (the Java
        client reads them unconditionally)."""
        fields = {} if ext is None else ext
        fields[mc.PROPERTY_MSG_REGION] = self.bc.regionId
        fields[mc.PROPERTY_TRACE_SWITCH] = "true" if self.bc.traceOn else "false"
        return RemotingCommand(code, 0, 409, 0, RPC_RESPONSE, remark, fields, None, 0)

    def forbidden_remark(self) -> str:
        return f"the broker[{self.bc.brokerIP1}] sending message is forbidden"

    # ---- msgCheck ---------------------------------------------------------------
    def pre_send(self, channel: Channel, h: SendHeader) -> tuple[RemotingCommand | None,
                                                                 TopicConfig | None]:
        """Start-time gate and ``msgCheck``: (error response, None) or (None, topic config)."""
        bc = self.bc
        if bc.startAcceptSendRequestTimeStamp and \
                self.c.message_store.now() < bc.startAcceptSendRequestTimeStamp:
            return self.response(RC.SYSTEM_ERROR, "broker unable to service, until "
                                 f"{bc.startAcceptSendRequestTimeStamp}"), None
        topic = h.topic
        topics = self.topics
        if not mc.is_writeable(bc.brokerPermission) and topics.is_order_topic(topic):
            return self.response(RC.NO_PERMISSION, self.forbidden_remark()), None
        tc = topics.table.get(topic)
        if tc is None:
            reason = T.validate_topic(topic)
            if reason is not None:
                return self.response(RC.SYSTEM_ERROR, reason), None
            if topic in T.NOT_ALLOWED_SEND_TOPICS:
                return self.response(RC.NO_PERMISSION,
                                     f"Sending message to topic[{topic}] is forbidden."), None
            tc = self._auto_create(channel, h)
            if tc is None:
                return self.response(RC.TOPIC_NOT_EXIST, self._not_exist_remark(topic)), None
        elif topic in T.NOT_ALLOWED_SEND_TOPICS:
            return self.response(RC.NO_PERMISSION,
                                 f"Sending message to topic[{topic}] is forbidden."), None
        valid = max(tc.writeQueueNums, tc.readQueueNums)
        if h.queueId >= valid:
            return self.response(
                RC.SYSTEM_ERROR, f"request queueId[{h.queueId}] is illegal, {tc} Producer: "
                f"{channel.remote_addr}"), None
        return None, tc

    def send_target(self, channel: Channel, h: SendHeader) -> tuple[RemotingCommand | None,
                                                                    TopicConfig | None, int]:
        """``pre_send``, then the queue the send goes to: the header's, or a
        random one of the topic's write queues when it names none (-1)."""
        error, tc = self.pre_send(channel, h)
        if error is not None:
            return error, None, -1
        queue_id = h.queueId
        return None, tc, queue_id if queue_id >= 0 else random_queue_id(tc.writeQueueNums)

    def _not_exist_remark(self, topic: str) -> str:
        text = f"topic[{topic}] not exist, apply first please!"
        if not self.bc.autoCreateTopicEnable:
            text += (" autoCreateTopicEnable=false on this broker: create the topic first "
                     "(rmq-admin updateTopic)")
        return text + FAQ_SUFFIX

    def _auto_create(self, channel: Channel, h: SendHeader) -> TopicConfig | None:
        topic = h.topic
        is_retry = topic.startswith(T.RETRY_GROUP_TOPIC_PREFIX)
        sys_flag = 0
        if h.unitMode:
            sys_flag = 0x2 if is_retry else 0x1  # TopicSysFlag unit-sub / unit
        self.c.log.warning("the topic %s not exist, producer: %s", topic, channel.remote_addr)
        tc = self.topics.create_topic_in_send_message_method(
            topic, h.defaultTopic, channel.remote_addr, h.defaultTopicQueueNums, sys_flag)
        if tc is None and is_retry:
            tc = self.topics.create_topic_in_send_message_back_method(
                topic, 1, mc.PERM_READ | mc.PERM_WRITE, sys_flag)
        return tc

    def dlq_topic_config(self, group: str) -> TopicConfig:
        return self.topics.create_topic_in_send_message_back_method(
            T.dlq_topic(group), DLQ_NUMS_PER_GROUP, mc.PERM_READ | mc.PERM_WRITE, 0)

    def group_not_exist(self, group: str) -> RemotingCommand:
        return self.response(RC.SUBSCRIPTION_GROUP_NOT_EXIST,
                             f"subscription group not exist, {group} {FAQ_SUFFIX}")

    # ---- store result -> response --------------------------------------------------
    def put_result_response(self, result: PutMessageResult | None, queue_id: int,
                            msg: Any = None) -> RemotingCommand:
        """``handlePutMessageResult``: the status decides the code; stored
        statuses (OK and the three timeouts) carry msgId/queueId/queueOffset,
        and ``recallHandle`` when ``msg`` (a single send's message, after the
        put hooks) was parked by the timer wheel."""
        if result is None:
            return self.response(RC.SYSTEM_ERROR, "store putMessage return null")
        status = result.status
        code = _STORED_CODES.get(status)
        if code is not None and result.append_result is not None:
            ar = result.append_result
            fields = {"msgId": ar.msg_id, "queueId": str(queue_id),
                      "queueOffset": str(ar.logics_offset)}
            handle = None if msg is None else recall_handle(msg.properties, self.bc.brokerName)
            if handle is not None:
                fields["recallHandle"] = handle
            return self.response(code, None, fields)
        return self.response(*self._failure(status, result.remark))

    def _failure(self, status: PutMessageStatus, remark: str = "") -> tuple[int, str]:
        S = PutMessageStatus
        if status is S.CREATE_MAPEDFILE_FAILED:
            return RC.SYSTEM_ERROR, "create mapped file failed, server is busy or broken."
        if status is S.MESSAGE_ILLEGAL or status is S.PROPERTIES_SIZE_EXCEEDED:
            return RC.MESSAGE_ILLEGAL, (
                "the message is illegal, maybe msg body or properties length not matched. msg "
                f"body length limit {self.c.store_config.maxMessageSize}B, msg properties "
                "length limit 32KB.")
        if status is S.SERVICE_NOT_AVAILABLE and remark:  # what ran out, said plainly
            return RC.SERVICE_NOT_AVAILABLE, f"service not available now: {remark}"
        if status is S.SERVICE_NOT_AVAILABLE:
            return RC.SERVICE_NOT_AVAILABLE, (
                "service not available now. It may be caused by one of the following reasons: "
                f"the broker's disk is full [{self.c.message_store.disk_util()}], messages are "
                "put to the slave, message store has been shut down, etc.")
        if status is S.OS_PAGECACHE_BUSY:
            return RC.SYSTEM_ERROR, "[PC_SYNCHRONIZED]broker busy, start flow control for a while"
        if status is S.LMQ_CONSUME_QUEUE_NUM_EXCEEDED:
            return RC.SYSTEM_ERROR, (
                "[LMQ_CONSUME_QUEUE_NUM_EXCEEDED]broker config enableLmq and enableMultiDispatch, lmq "
                "consumeQueue num exceed maxLmqConsumeQueueNum config num, default limit 2w.")
        if status is S.UNKNOWN_ERROR:
            return RC.SYSTEM_ERROR, "UNKNOWN_ERROR"
        if status in TIMER_STATUSES:
            return timer_failure(status, self.c.store_config)
        return RC.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"


_STORED_CODES = {
    PutMessageStatus.PUT_OK: RC.SUCCESS,
    PutMessageStatus.FLUSH_DISK_TIMEOUT: RC.FLUSH_DISK_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: RC.FLUSH_SLAVE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE: RC.SLAVE_NOT_AVAILABLE,
}


TIMER_STATUSES = (PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL, PutMessageStatus.WHEEL_TIMER_FLOW_CONTROL,
                   PutMessageStatus.WHEEL_TIMER_NOT_ENABLE)


def recall_handle(props: dict[str, str], broker_name: str) -> str | None:
    """``SendMessageProcessor.attachRecallHandle`` of 5.3.3: a stored message
    the timer hook parked (TIMER_OUT_MS and REAL_TOPIC set, the real topic not
    a retry topic) is recalled by topic, broker, slot time + 1 ms (its due time
    lies within the slot) and unique key; None for any other message (also when
    TIMER_OUT_MS is not a number, which 5.3.3 would fail on)."""
    out_ms = parse_java_long(props.get(tm.PROPERTY_TIMER_OUT_MS))
    real_topic = props.get(mc.PROPERTY_REAL_TOPIC)
    if out_ms is None or real_topic is None or real_topic.startswith(T.RETRY_GROUP_TOPIC_PREFIX):
        return None
    uniq = props.get(mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    return tm.encode_recall_handle(real_topic, broker_name, out_ms + 1,
                                   "null" if uniq is None else uniq)


def timer_failure(status: PutMessageStatus, sc: Any) -> tuple[int, str]:
    """The code and remark 5.3.3's SendMessageProcessor gives a refused timer message."""
    if status is PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL:
        return RC.MESSAGE_ILLEGAL, (
            "timer message illegal, the delay time should not be bigger than the max delay "
            f"{sc.timerMaxDelaySec * 1000}ms; or if set del msg, the delay time should be bigger "
            "than the current time")
    if status is PutMessageStatus.WHEEL_TIMER_FLOW_CONTROL:
        n = sc.timerCongestNumEachSlot
        return RC.SYSTEM_ERROR, (
            f"timer message is under flow control, max num limit is {n * 2} or the current value "
            f"is greater than {n} and less than {n * 2}, trigger random flow control")
    return RC.SYSTEM_ERROR, ("accurate timer message is not enabled, timerWheelEnable is "
                             f"{'true' if sc.timerWheelEnable else 'false'}")
