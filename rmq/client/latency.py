"""Latency-fault avoidance for producers (``MQFaultStrategy`` and
``LatencyFaultToleranceImpl`` of RocketMQ, kept small).

After every send the producer records how long the broker took; a slow or
failed broker is marked "not available" for a while (the slower, the longer),
and queue selection skips it until then.  A failed send counts as 30 s of
latency (10 minutes of quarantine, Java's tables); when every broker is in
quarantine the least bad one is still used, so a single-broker cluster keeps
working after a restart.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from rmq.client.message import MessageQueue

# latencyMax[i] (ms) -> notAvailableDuration[i] (ms), as MQFaultStrategy.
LATENCY_MAX = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION = (0, 0, 30000, 60000, 120000, 180000, 600000)
ISOLATION_LATENCY = 30000
FAST_LATENCY = LATENCY_MAX[NOT_AVAILABLE_DURATION.index(30000)]  # below: never quarantined


def not_available_duration(latency_ms: float) -> int:
    """Quarantine (ms) for a broker that answered in ``latency_ms``."""
    for i in range(len(LATENCY_MAX) - 1, -1, -1):
        if latency_ms >= LATENCY_MAX[i]:
            return NOT_AVAILABLE_DURATION[i]
    return 0


class LatencyFaultTolerance:
    """Per-broker "available again at" times."""

    def __init__(self, clock=time.monotonic) -> None:
        self._clock = clock
        # name -> (latency, start ts); public so the send path can skip update()
        # for a fast answer while nothing is quarantined (it would do nothing)
        self.items: dict[str, tuple[float, float]] = {}

    def update(self, broker_name: str, latency_ms: float, isolation: bool) -> None:
        if not isolation and latency_ms < FAST_LATENCY:
            # no quarantine: an entry would say "available now", as no entry does
            if broker_name in self.items:
                del self.items[broker_name]
            return
        lat = ISOLATION_LATENCY if isolation else latency_ms
        duration = not_available_duration(lat)
        self.items[broker_name] = (lat, self._clock() + duration / 1000.0)

    def is_available(self, broker_name: str) -> bool:
        item = self.items.get(broker_name)
        return item is None or self._clock() >= item[1]

    def remove(self, broker_name: str) -> None:
        self.items.pop(broker_name, None)

    def pick_one_at_least(self) -> str | None:
        """The least bad broker when all are quarantined (lowest latency, earliest)."""
        if not self.items:
            return None
        return min(self.items.items(), key=lambda kv: (kv[1][1], kv[1][0]))[0]


class MQFaultStrategy:
    """Chooses the next queue of a topic: round-robin, skipping the broker that
    just failed and (when enabled) brokers in quarantine."""

    def __init__(self, enabled: bool = True, clock=time.monotonic) -> None:
        self.enabled = enabled
        self.tolerance = LatencyFaultTolerance(clock)

    def select(self, queues: Sequence[MessageQueue], counter: int,
               last_broker: str | None) -> MessageQueue:
        n = len(queues)
        if self.enabled:
            for i in range(n):
                mq = queues[(counter + i) % n]
                if self.tolerance.is_available(mq.broker_name) and mq.broker_name != last_broker:
                    return mq
            for i in range(n):
                mq = queues[(counter + i) % n]
                if self.tolerance.is_available(mq.broker_name):
                    return mq
            best = self.tolerance.pick_one_at_least()
            for i in range(n):
                mq = queues[(counter + i) % n]
                if mq.broker_name == best:
                    return mq
            return queues[counter % n]
        if last_broker is not None:
            for i in range(n):
                mq = queues[(counter + i) % n]
                if mq.broker_name != last_broker:
                    return mq
        return queues[counter % n]

    def update(self, broker_name: str, latency_ms: float, isolation: bool) -> None:
        if self.enabled:
            self.tolerance.update(broker_name, latency_ms, isolation)
