"""RocketMQ 5 timer messages: the timer store (timer log, timer wheel,
checkpoint, metrics) and the put hook that parks timer messages."""

from rmq.store.timer.hook import TimerPutHook
from rmq.store.timer.message_store import TimerMessageStore

__all__ = ["TimerMessageStore", "TimerPutHook"]
