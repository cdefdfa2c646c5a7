"""Message properties of RocketMQ 5 timer messages (MessageConst, 5.3.3)."""

import base64

PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
PROPERTY_TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
PROPERTY_TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
PROPERTY_TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
PROPERTY_TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
PROPERTY_TIMER_DELAY_LEVEL = "TIMER_DELAY_LEVEL"

TIMER_TOPIC = "rmq_sys_wheel_timer"

# what a sender sets to ask for a timer (HookUtils.checkIfTimerMessage)
REQUEST_PROPERTIES = (PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS)

JAVA_LONG_MAX = 2**63 - 1


def build_delete_key(real_topic: str, uniq_key: str) -> str:
    """``TimerMessageStore.buildDeleteKey``: what TIMER_DEL_UNIQKEY holds."""
    return f"{real_topic}+{uniq_key}"


# RecallMessageHandle of 5.3.3: "v1 <topic> <brokerName> <due ms> <uniq key>", base64url
RECALL_HANDLE_VERSION = "v1"


def encode_recall_handle(topic: str, broker_name: str, due_ms: int, uniq_key: str) -> str:
    """The handle a send of a timer message answers with (``HandleV1.buildHandle``)."""
    raw = " ".join((RECALL_HANDLE_VERSION, topic, broker_name, str(due_ms), uniq_key))
    return base64.urlsafe_b64encode(raw.encode()).decode()


def decode_recall_handle(handle: str) -> tuple[str, str, str, str]:
    """(topic, broker name, due ms text, uniq key); ValueError "recall handle is
    invalid" for anything else, as ``RecallMessageHandle.decodeHandle``."""
    try:
        padded = handle + "=" * (-len(handle) % 4)  # padding is optional, as in Java
        raw = base64.urlsafe_b64decode(padded.encode()).decode() if handle else ""
    except (ValueError, UnicodeError):
        raw = ""
    items = raw.split(" ")
    if len(items) < 5 or items[0] != RECALL_HANDLE_VERSION:
        raise ValueError("recall handle is invalid")
    return items[1], items[2], items[3], items[4]
