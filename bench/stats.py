"""Latency statistics of a measured window."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of an already sorted sequence."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def latency_summary(seconds: Iterable[float]) -> dict[str, float]:
    """avg / p50 / p99 / max in milliseconds of latencies given in seconds."""
    values = sorted(seconds)
    if not values:
        return {"avg_ms": 0.0, "p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
    return {"avg_ms": 1000 * sum(values) / len(values),
            "p50_ms": 1000 * percentile(values, 50),
            "p99_ms": 1000 * percentile(values, 99),
            "max_ms": 1000 * values[-1]}
