"""StoreStatsService: put/get counters, TPS windows and put latency
distribution (``StoreStatsService`` of 4.9.8), plus per-topic counters."""

from __future__ import annotations

import collections
import time

from rmq._fast import compiled
from rmq.store.service import ServiceThread

_BUCKETS = (0, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000)
_BUCKET_NAMES = (
    "[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]", "[200~500ms]",
    "[500ms~1s]", "[1~2s]", "[2~3s]", "[3~4s]", "[4~5s]", "[5~10s]", "[10s~]",
)
_WINDOWS = (10, 60, 600)


def _bucket(ms: int) -> int:
    for i, limit in enumerate(_BUCKETS):
        if ms <= limit:
            return i
    return len(_BUCKETS)


class PutCounters:
    """The put and get counters of StoreStatsService (twin of
    ``rmq._fast.store_stats.PutCounters``, whose compiled callers count
    without a Python call)."""

    def __init__(self) -> None:
        self.put_message_times_total = 0
        self.put_message_size_total = 0
        self.put_message_failed_times = 0
        self.put_message_entire_time_max = 0
        self.get_message_entire_time_max = 0
        self.get_message_times_total_found = 0
        self.get_message_times_total_miss = 0
        self.get_message_transfered_msg_count = 0
        self.dispatch_max_buffer = 0
        self.put_latency = [0] * (len(_BUCKETS) + 1)
        self.topic_put_nums: dict[str, int] = {}
        self.topic_put_size: dict[str, int] = {}

    def on_put(self, topic: str, count: int, size: int, elapsed_ms: int) -> None:
        self.on_puts(topic, count, size, 0)
        self.put_latency[_bucket(elapsed_ms)] += 1
        if elapsed_ms > self.put_message_entire_time_max:
            self.put_message_entire_time_max = elapsed_ms

    def on_put_one(self, topic: str, size: int) -> None:
        """``on_put`` of one message stored in no measurable time (the
        single-send path, once per message: no bucket search)."""
        self.on_puts(topic, 1, size, 1)

    def on_puts(self, topic: str, count: int, size: int, puts: int) -> None:
        """``puts`` puts (single sends, batches) of ``count`` messages and
        ``size`` bytes in all, each stored in no measurable time."""
        self.put_message_times_total += count
        self.put_message_size_total += size
        self.topic_put_nums[topic] = self.topic_put_nums.get(topic, 0) + count
        self.topic_put_size[topic] = self.topic_put_size.get(topic, 0) + size
        self.put_latency[0] += puts

    def on_put_failed(self) -> None:
        self.put_message_failed_times += 1

    def on_get(self, found: int, elapsed_ms: int) -> None:
        if found:
            self.get_message_times_total_found += 1
            self.get_message_transfered_msg_count += found
        else:
            self.get_message_times_total_miss += 1
        if elapsed_ms > self.get_message_entire_time_max:
            self.get_message_entire_time_max = elapsed_ms


_fast = compiled("store_stats")
if _fast is not None and _fast.BUCKET_LIMITS != _BUCKETS:
    raise ImportError("rmq._fast.store_stats was built with other latency buckets: rebuild it")
_Counters = _fast.PutCounters if _fast is not None else PutCounters


class StoreStatsService(ServiceThread, _Counters):
    """StoreStatsService of 4.9.8: the counters (compiled where built), a
    sample a second and the runtime info texts made from them."""

    name = "StoreStatsService"

    def __init__(self) -> None:
        ServiceThread.__init__(self)
        if _Counters is PutCounters:
            PutCounters.__init__(self)
        self.boot_timestamp = int(time.time() * 1000)
        self._samples: collections.deque = collections.deque(maxlen=601)

    # --- sampling ------------------------------------------------------------------------
    def sample(self) -> None:
        self._samples.append((
            time.monotonic(), self.put_message_times_total, self.get_message_times_total_found,
            self.get_message_times_total_miss, self.get_message_transfered_msg_count,
        ))

    def run(self) -> None:
        while not self.stopped:
            self.sample()
            self._stopped.wait(1.0)

    def _tps(self, field: int, seconds: int) -> float:
        s = self._samples
        if len(s) < 2:
            return 0.0
        last = s[-1]
        first = s[max(0, len(s) - 1 - seconds)]
        dt = last[0] - first[0]
        if dt <= 0:
            return 0.0
        if field == 0:
            return 0.0
        if field == -1:  # total gets = found + miss
            return (last[2] + last[3] - first[2] - first[3]) / dt
        return (last[field] - first[field]) / dt

    def _tps_text(self, field: int) -> str:
        return " ".join(f"{self._tps(field, w):.2f}" for w in _WINDOWS)

    def _latency_percentile(self, p: float) -> str:
        total = sum(self.put_latency)
        if total == 0:
            return "0"
        need = total * p
        acc = 0
        for i, n in enumerate(self.put_latency):
            acc += n
            if acc >= need:
                return _BUCKET_NAMES[i]
        return _BUCKET_NAMES[-1]

    def runtime_info(self) -> dict[str, str]:
        now = int(time.time() * 1000)
        total = self.put_message_times_total
        dist = " ".join(f"{name}:{n}" for name, n in zip(_BUCKET_NAMES, self.put_latency, strict=True))
        run_s = (now - self.boot_timestamp) // 1000
        return {
            "bootTimestamp": str(self.boot_timestamp),
            "runtime": f"[ {run_s // 86400} days, {run_s % 86400 // 3600} hours, "
                       f"{run_s % 3600 // 60} minutes, {run_s % 60} seconds ]",
            "putMessageEntireTimeMax": str(self.put_message_entire_time_max),
            "putMessageTimesTotal": str(total),
            "putMessageFailedTimes": str(self.put_message_failed_times),
            "putMessageSizeTotal": str(self.put_message_size_total),
            "putMessageDistributeTime": dist,
            "putMessageAverageSize": str(self.put_message_size_total / total if total else 0.0),
            "dispatchMaxBuffer": str(self.dispatch_max_buffer),
            "getMessageEntireTimeMax": str(self.get_message_entire_time_max),
            "putTps": self._tps_text(1),
            "getFoundTps": self._tps_text(2),
            "getMissTps": self._tps_text(3),
            "getTotalTps": self._tps_text(-1),
            "getTransferedTps": self._tps_text(4),
            "putLatency99": self._latency_percentile(0.99),
            "putLatency999": self._latency_percentile(0.999),
        }
