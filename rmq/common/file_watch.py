"""FileWatchService: notice that files changed (RocketMQ ``FileWatchService`` /
``AclFileWatchService``).

A poll on the event loop: every ``interval_s`` the watched paths (a callable,
so a directory's new files are picked up) are stat-ed, and when any was
added, removed or modified -- a different inode, size, mtime or ctime, which
also catches a same-second rewrite and a file renamed over the old one --
``on_change`` is called with the paths that differ.  4.9.8 polls every 5 s
(ACL) or 500 ms (TLS certificates); a stat of a few files is microseconds.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable

from rmq.common.periodic import PeriodicService

Fingerprint = tuple[int, int, int, int]


def fingerprint(path: str) -> Fingerprint | None:
    """What identifies a version of a file (None: it does not exist)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


class FileWatchService(PeriodicService):
    failure_message = "file watch failed"

    def __init__(self, name: str, paths: Callable[[], Iterable[str]],
                 on_change: Callable[[list[str]], None], interval_s: float = 0.5,
                 logger: logging.Logger | None = None) -> None:
        super().__init__(name, logger)
        self.interval_s = interval_s
        self._paths = paths
        self._on_change = on_change
        self._seen = self._snapshot()

    def _snapshot(self) -> dict[str, Fingerprint | None]:
        return {p: fingerprint(p) for p in self._paths()}

    def run_once(self) -> None:
        now = self._snapshot()
        if now == self._seen:
            return
        changed = sorted(p for p in now.keys() | self._seen.keys()
                         if now.get(p) != self._seen.get(p))
        self._seen = now
        self.log.info("%s: changed %s", self.name, ", ".join(changed))
        self._on_change(changed)
