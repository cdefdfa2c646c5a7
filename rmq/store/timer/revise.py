"""Recount of the pending timers per topic (``config/timermetrics``) from the
timer log, 5.3.3's ``checkAndReviseMetrics``.

The counts are kept by adding and subtracting as timers enter the wheel and
leave it, and written with the other timer files once per
timerFlushIntervalMs; the log and the wheel are mapped, so after a SIGKILL
they hold what happened up to the kill while the counts file is up to a
flush interval older.  Every unit of the log due at or after the read
position is a pending timer (a delete marker counts -1, as when it was
enqueued), so the counts are rebuilt from the units themselves.  A unit names
its topic by Java hash only: the hash is matched against the topics the
counts file knows, and for an unknown or shared hash the parked message is
read for its REAL_TOPIC.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from rmq.store.timer import layout as L


def pending_units(files: Iterable, read_ms: int) -> Iterable[tuple]:
    """Units (their raw fields, in ``L.Unit`` order) of the mapped timer-log
    files due at or after ``read_ms``."""
    for mf in files:
        end = min(mf.wrote_position, mf.file_size)
        for f in L.iter_unit_fields(mf.view[:end]):
            if f[0] != L.UNIT_SIZE or not L.is_magic_ok(f[2]):
                break  # the blank ending a file
            if f[3] + f[4] >= read_ms:  # writeTime + delay: the unit's slot
                yield f


def recount(units: Iterable[tuple], known_topics: Iterable[str],
            topic_of: Callable[[int, int], str | None]) -> Counter:
    """Pending timers per topic; ``topic_of(offsetPy, sizePy)`` reads a unit's
    parked message for its real topic."""
    by_hash: dict[int, str | None] = {}
    for t in known_topics:
        h = L.java_string_hash(t)
        by_hash[h] = None if h in by_hash else t  # None: a shared hash
    counts: Counter = Counter()
    for u in units:  # (size, prev, magic, write, delay, offsetPy, sizePy, hash, reserved)
        topic = by_hash.get(u[7])
        if topic is None:
            topic = topic_of(u[5], u[6])
            if topic is None:
                continue  # its message is gone: nothing to deliver
        counts[topic] += -1 if L.is_delete(u[2]) else 1
    return counts
