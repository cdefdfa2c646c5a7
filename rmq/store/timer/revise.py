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


def pending_units(files: Iterable, read_ms: int) -> Iterable[L.Unit]:
    """Units of the mapped timer-log files due at or after ``read_ms``."""
    for mf in files:
        view = mf.view
        end = min(mf.wrote_position, mf.file_size)
        for pos in range(0, end - L.UNIT_SIZE + 1, L.UNIT_SIZE):
            u = L.unpack_unit(view, pos)
            if u.size != L.UNIT_SIZE or not L.is_magic_ok(u.magic):
                break  # the blank ending a file
            if u.delayed_time_ms >= read_ms:
                yield u


def recount(units: Iterable[L.Unit], known_topics: Iterable[str],
            topic_of: Callable[[L.Unit], str | None]) -> Counter:
    """Pending timers per topic; ``topic_of`` reads a unit's parked message."""
    by_hash: dict[int, str | None] = {}
    for t in known_topics:
        h = L.java_string_hash(t)
        by_hash[h] = None if h in by_hash else t  # None: a shared hash
    counts: Counter = Counter()
    for u in units:
        topic = by_hash.get(u.topic_hash)
        if topic is None:
            topic = topic_of(u)
            if topic is None:
                continue  # its message is gone: nothing to deliver
        counts[topic] += -1 if L.is_delete(u.magic) else 1
    return counts
