"""Well-known topic and group names of RocketMQ 4.9.8 (``MixAll``, ``TopicValidator``)."""

from __future__ import annotations

import re

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
BENCHMARK_TOPIC = "BenchmarkTest"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
TRANS_SYS_CONSUMER_GROUP = "CID_RMQ_SYS_TRANS"

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
REPLY_TOPIC_POSTFIX = "_REPLY_TOPIC"

DEFAULT_PRODUCER_GROUP = "DEFAULT_PRODUCER"
DEFAULT_CONSUMER_GROUP = "DEFAULT_CONSUMER"
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
SCHEDULE_CONSUMER_GROUP = "SCHEDULE_CONSUMER"  # MixAll: the schedule service's reads
CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
SELF_TEST_PRODUCER_GROUP = "SELF_TEST_P_GROUP"
SELF_TEST_CONSUMER_GROUP = "SELF_TEST_C_GROUP"
ONS_HTTP_PROXY_GROUP = "CID_ONS-HTTP-PROXY"
CID_ONSAPI_PERMISSION_GROUP = "CID_ONSAPI_PERMISSION"
CID_ONSAPI_OWNER_GROUP = "CID_ONSAPI_OWNER"
CID_ONSAPI_PULL_GROUP = "CID_ONSAPI_PULL"
CID_RMQ_SYS_PREFIX = "CID_RMQ_SYS_"
FILTERSRV_CONSUMER_GROUP = "FILTERSRV_CONSUMER"
MONITOR_CONSUMER_GROUP = "__MONITOR_CONSUMER"

MASTER_ID = 0
TOPIC_MAX_LENGTH = 127
_VALID_TOPIC = re.compile(r"^[%|a-zA-Z0-9_-]+$")

# Topics a producer may not send to (TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET).
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        SCHEDULE_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
    }
)

SYSTEM_TOPICS = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        SCHEDULE_TOPIC,
        BENCHMARK_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
    }
)


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def pop_retry_topic_v1(topic: str, group: str) -> str:
    """``KeyBuilder.buildPopRetryTopicV1``: where POP retries of ``topic`` go."""
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}"


def pop_retry_topic_v2(topic: str, group: str) -> str:
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}+{topic}"


def retry_topic_group(topic: str) -> str:
    """``KeyBuilder.parseGroup``: the group of a retry topic (of a v2 POP retry
    topic, the part before ``+``; a v1 one keeps its ``_topic`` tail, as in 5.3.3)."""
    parts = topic.split("+")
    while len(parts) > 1 and not parts[-1]:  # Java's split drops trailing empty parts
        parts.pop()
    if "+" in topic and len(parts) == 2:
        return parts[0][len(RETRY_GROUP_TOPIC_PREFIX):]
    return topic[len(RETRY_GROUP_TOPIC_PREFIX):]


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_dlq_topic(topic: str) -> bool:
    return topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def validate_topic(topic: str | None) -> str | None:
    """``TopicValidator.validateTopic``: ``None`` when valid, else the reason."""
    if not topic:
        return "The specified topic is blank."
    if not _VALID_TOPIC.match(topic):
        return "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(topic) > TOPIC_MAX_LENGTH:
        return "The specified topic is longer than topic max length."
    return None
