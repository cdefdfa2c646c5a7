"""The client's builders of the two hot requests' extFields (SEND_MESSAGE_V2 /
SEND_BATCH_MESSAGE and PULL_MESSAGE) and the PullSysFlag bits.

Those requests are sent hundreds of thousands of times per second and a
dataclass round trip per message is measurable, so they are plain dicts; their
field names are checked against ``SendMessageRequestHeaderV2`` and
``PullMessageRequestHeader`` of ``rmq.common.protocol.headers_broker`` in the
unit tests.  Every header class lives in ``rmq.common.protocol``; the broker's
messaging processors still import a few of them through this module.
"""

from __future__ import annotations

from rmq.common.protocol.headers_broker import (  # noqa: F401  (re-exported, see above)
    ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryMessageRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
)


def send_header_v2(group: str, topic: str, default_topic: str, default_queue_nums: int,
                   queue_id: int, sys_flag: int, born_ts: int, flag: int, properties: str,
                   batch: bool, broker_name: str) -> dict[str, str]:
    """The extFields of a SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE request."""
    return {
        "a": group, "b": topic, "c": default_topic, "d": str(default_queue_nums),
        "e": str(queue_id), "f": str(sys_flag), "g": str(born_ts), "h": str(flag),
        "i": properties, "j": "0", "k": "false", "m": "true" if batch else "false",
        "n": broker_name,
    }


# PullSysFlag bits
PULL_FLAG_COMMIT_OFFSET = 0x1
PULL_FLAG_SUSPEND = 0x2
PULL_FLAG_SUBSCRIPTION = 0x4
PULL_FLAG_CLASS_FILTER = 0x8
PULL_FLAG_LITE_PULL = 0x10


def pull_header(group: str, topic: str, queue_id: int, offset: int, max_nums: int,
                sys_flag: int, commit_offset: int, suspend_ms: int, subscription: str | None,
                sub_version: int, expression_type: str, broker_name: str) -> dict[str, str]:
    """The extFields of a PULL_MESSAGE request."""
    ext = {
        "consumerGroup": group, "topic": topic, "queueId": str(queue_id),
        "queueOffset": str(offset), "maxMsgNums": str(max_nums), "sysFlag": str(sys_flag),
        "commitOffset": str(commit_offset), "suspendTimeoutMillis": str(suspend_ms),
        "subVersion": str(sub_version), "expressionType": expression_type, "bname": broker_name,
    }
    if subscription is not None:
        ext["subscription"] = subscription
    return ext
