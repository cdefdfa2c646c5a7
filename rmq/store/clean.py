"""CleanCommitLogService and CleanConsumeQueueService (STORE_FORMAT.md 11),
run together by one thread every ``cleanResourceInterval`` (first run after
60 s), plus the disk-ratio checks that raise and clear DISK_FULL."""

from __future__ import annotations

import logging
import math
import os
import time

from rmq.store.service import ServiceThread

log = logging.getLogger("store")

FIRST_DELAY_S = 60.0
MANUAL_DELETE_RUNS = 20
DISK_CHECK_INTERVAL_S = 10.0


def disk_used_ratio(path: str) -> float:
    """used / (used + usable) rounded up to a whole percent; -1 if unknown."""
    p = path
    while p and not os.path.exists(p):
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    try:
        st = os.statvfs(p or ".")
    except OSError:
        return -1.0
    total = st.f_blocks * st.f_frsize
    free = st.f_bfree * st.f_frsize
    usable = st.f_bavail * st.f_frsize
    used = total - free
    if used + usable <= 0:
        return -1.0
    return math.ceil(used * 100.0 / (used + usable)) / 100.0


class CleanCommitLogService:
    def __init__(self, store) -> None:
        self.store = store
        self.manual_delete_file_several_times = 0
        self.clean_immediately = False

    def is_time_to_delete(self) -> bool:
        hour = time.localtime().tm_hour
        for token in self.store.config.deleteWhen.split(";"):
            token = token.strip()
            if token.isdigit() and int(token) == hour:
                return True
        return False

    def is_space_to_delete(self) -> bool:
        """Evaluate the disk ratios; sets clean_immediately and DISK_FULL."""
        cfg = self.store.config
        flags = self.store.running_flags
        ratio = cfg.disk_max_used_space_ratio() / 100.0
        self.clean_immediately = False
        full = False
        physic = min((disk_used_ratio(p) for p in cfg.commit_log_dirs()), default=-1.0)
        if physic > cfg.diskSpaceWarningLevelRatio:
            if flags.get_and_make_disk_full():
                log.error("physic disk maybe full soon %.2f, so mark disk full", physic)
            self.clean_immediately = True
        elif physic > cfg.diskSpaceCleanForciblyRatio:
            self.clean_immediately = True
        elif flags.is_disk_full() and self.store.reserve_tails():
            flags.get_and_make_disk_ok()
            log.info("physic disk space OK %.2f, so mark disk ok", physic)
            # records whose consume-queue or index file did not fit are dispatched now
            self.store.on_committed()
        if physic < 0 or physic > ratio:
            full = True
        logic = disk_used_ratio(os.path.join(cfg.storePathRootDir, "consumequeue"))
        if logic > cfg.diskSpaceWarningLevelRatio:
            if flags.get_and_make_disk_full():
                log.error("logics disk maybe full soon %.2f, so mark disk full", logic)
            self.clean_immediately = True
        elif logic > cfg.diskSpaceCleanForciblyRatio:
            self.clean_immediately = True
        if logic < 0 or logic > ratio:
            full = True
        return full

    def run(self) -> int:
        cfg = self.store.config
        time_up = self.is_time_to_delete()
        space_full = self.is_space_to_delete()
        manual = self.manual_delete_file_several_times > 0
        deleted = 0
        if time_up or space_full or manual:
            if manual:
                self.manual_delete_file_several_times -= 1
            at_once = cfg.cleanFileForciblyEnable and self.clean_immediately
            log.info("begin to delete before %d hours file. timeup: %s spacefull: %s manualDeleteFileSeveralTimes: %d "
                     "cleanAtOnce: %s", cfg.fileReservedTime, time_up, space_full,
                     self.manual_delete_file_several_times, at_once)
            deleted = self.store.commit_log.mfq.delete_expired_file_by_time(
                cfg.fileReservedTime * 3600 * 1000, cfg.deleteCommitLogFilesInterval, at_once)
        self.store.commit_log.mfq.retry_hanged(cfg.destroyMapedFileIntervalForcibly)
        return deleted


class CleanConsumeQueueService:
    def __init__(self, store) -> None:
        self.store = store
        self.last_physical_min_offset = 0

    def run(self) -> None:
        min_offset = self.store.commit_log.get_min_offset()
        if min_offset > self.last_physical_min_offset:
            self.last_physical_min_offset = min_offset
            for cq in self.store.all_consume_queues():
                if cq.delete_expired_file(min_offset) and self.store.config.deleteConsumeQueueFilesInterval > 0:
                    time.sleep(self.store.config.deleteConsumeQueueFilesInterval / 1000)
                cq.mfq.retry_hanged(self.store.config.destroyMapedFileIntervalForcibly)
            self.store.index_service.delete_expired_file(min_offset)


class CleanService(ServiceThread):
    """The scheduled task that runs both cleaners."""

    name = "StoreScheduledThread"

    def __init__(self, store) -> None:
        super().__init__()
        self.commit_log = CleanCommitLogService(store)
        self.consume_queue = CleanConsumeQueueService(store)
        self.store = store

    def run_once(self) -> None:
        self.commit_log.run()
        self.consume_queue.run()

    def run(self) -> None:
        next_clean = time.monotonic() + FIRST_DELAY_S
        while not self.stopped:
            try:
                if time.monotonic() >= next_clean:
                    self.run_once()
                    next_clean = time.monotonic() + self.store.config.cleanResourceInterval / 1000
                else:
                    # DISK_FULL is re-evaluated every 10 s even between cleanings
                    self.commit_log.is_space_to_delete()
            except Exception:  # noqa: BLE001 - keep cleaning on the next round
                log.exception("clean resources failed")
            self._stopped.wait(min(DISK_CHECK_INTERVAL_S, max(0.0, next_clean - time.monotonic()) + 0.001))
