"""MessageStoreConfig: the store's settings under their 4.9.8 property names.

Mirrors ``org.apache.rocketmq.store.config.MessageStoreConfig`` (defaults from
../shared/spec/DEFAULTS.md section 6).  Field names are the property names, so
``rmq.common.properties.apply_properties`` maps broker.conf keys onto it
mechanically.  The two disk thresholds that Java reads from system properties
(``rocketmq.broker.diskSpaceWarningLevelRatio`` / ``...CleanForciblyRatio``)
are plain fields here so tests can lower them.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field

from rmq.common.properties import ConfigError


class BrokerRole(enum.Enum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


class FlushDiskType(enum.Enum):
    SYNC_FLUSH = "SYNC_FLUSH"
    ASYNC_FLUSH = "ASYNC_FLUSH"


def _default_root() -> str:
    return os.path.join(os.path.expanduser("~"), "store")


@dataclass(slots=True)
class MessageStoreConfig:
    """Every MessageStoreConfig key of 4.9.8 that the store acts on."""

    storePathRootDir: str = field(default_factory=_default_root)
    storePathCommitLog: str | None = None
    readOnlyCommitLogStorePaths: str | None = None
    mappedFileSizeCommitLog: int = 1024 * 1024 * 1024
    mappedFileSizeConsumeQueue: int = 300000 * 20
    enableConsumeQueueExt: bool = False
    mappedFileSizeConsumeQueueExt: int = 48 * 1024 * 1024
    bitMapLengthConsumeQueueExt: int = 64
    brokerRole: BrokerRole = BrokerRole.ASYNC_MASTER
    flushDiskType: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    maxMessageSize: int = 1024 * 1024 * 4
    checkCRCOnRecover: bool = True
    useReentrantLockWhenPutMessage: bool = True
    # flush / commit
    flushIntervalCommitLog: int = 500
    flushCommitLogTimed: bool = True
    flushCommitLogLeastPages: int = 4
    flushCommitLogThoroughInterval: int = 1000 * 10
    syncFlushTimeout: int = 1000 * 5
    transientStorePoolEnable: bool = False
    transientStorePoolSize: int = 5
    fastFailIfNoBufferInStorePool: bool = False
    commitIntervalCommitLog: int = 200
    commitCommitLogLeastPages: int = 4
    commitCommitLogThoroughInterval: int = 200
    flushIntervalConsumeQueue: int = 1000
    flushConsumeQueueLeastPages: int = 2
    flushConsumeQueueThoroughInterval: int = 1000 * 60
    warmMapedFileEnable: bool = False
    flushLeastPagesWhenWarmMapedFile: int = 1024 // 4 * 16
    # rmq: the appender keeps the pages just past the commit log's appends
    # written with zeros (CommitLog.zero_ahead); false: the allocation thread
    # faults them in ahead instead (MappedFileQueue.populate_ahead)
    rmqZeroFillAheadEnable: bool = True
    # under SYNC_FLUSH, a new commit-log file's blocks are written with zeros
    # and synced before the file is used (MappedFile.write_blocks), so a group
    # commit's msync writes data and flushes, with no reserved blocks to turn
    # into written ones (and their metadata to write) on every flush
    rmqPrewriteCommitLogEnable: bool = True
    osPageCacheBusyTimeOutMills: int = 1000
    # cleaning
    deleteWhen: str = "04"
    fileReservedTime: int = 72
    diskMaxUsedSpaceRatio: int = 75
    cleanFileForciblyEnable: bool = True
    cleanResourceInterval: int = 10000
    deleteCommitLogFilesInterval: int = 100
    deleteConsumeQueueFilesInterval: int = 100
    destroyMapedFileIntervalForcibly: int = 1000 * 120
    redeleteHangedFileInterval: int = 1000 * 120
    diskSpaceWarningLevelRatio: float = 0.90
    diskSpaceCleanForciblyRatio: float = 0.85
    # reading / index
    accessMessageInMemoryMaxRatio: int = 40
    maxTransferBytesOnMessageInMemory: int = 1024 * 256
    maxTransferCountOnMessageInMemory: int = 32
    maxTransferBytesOnMessageInDisk: int = 1024 * 64
    maxTransferCountOnMessageInDisk: int = 8
    messageIndexEnable: bool = True
    messageIndexSafe: bool = False
    maxHashSlotNum: int = 5000000
    maxIndexNum: int = 5000000 * 4
    maxMsgsNumBatch: int = 64
    defaultQueryMaxNum: int = 32
    diskFallRecorded: bool = True
    # HA / schedule (read by the store and the services built on it)
    haListenPort: int = 10912
    haMasterAddress: str | None = None
    haSendHeartbeatInterval: int = 1000 * 5
    haHousekeepingInterval: int = 1000 * 20
    haTransferBatchSize: int = 1024 * 32
    haSlaveFallbehindMax: int = 1024 * 1024 * 256
    slaveTimeout: int = 3000
    offsetCheckInSlave: bool = False
    messageDelayLevel: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    flushDelayOffsetInterval: int = 1000 * 10
    enableScheduleMessageStats: bool = True
    enableScheduleAsyncDeliver: bool = False
    scheduleAsyncDeliverMaxPendingLimit: int = 2000
    scheduleAsyncDeliverMaxResendNum2Blocked: int = 3
    duplicationEnable: bool = False
    debugLockEnable: bool = False
    enableLmq: bool = False
    enableMultiDispatch: bool = False
    maxLmqConsumeQueueNum: int = 20000
    # the DLedger commit log (rmq/dledger/commit_log.py)
    enableDLegerCommitLog: bool = False
    dLegerGroup: str | None = None
    dLegerPeers: str | None = None
    dLegerSelfId: str | None = None
    preferredLeaderId: str | None = None
    enableBatchPush: bool = True  # rmq batches DLedger pushes by default (4.9.8: false)
    storePathDLedgerCommitLog: str | None = None
    # timer messages (RocketMQ 5.3.3 names and defaults; rmq/store/timer)
    mappedFileSizeTimerLog: int = 100 * 1024 * 1024
    timerPrecisionMs: int = 1000
    timerRollWindowSlot: int = 3600 * 24 * 2
    timerFlushIntervalMs: int = 1000
    timerGetMessageThreadNum: int = 3
    timerPutMessageThreadNum: int = 3
    timerEnableDisruptor: bool = False
    timerEnableCheckMetrics: bool = True
    timerInterceptDelayLevel: bool = False
    timerMaxDelaySec: int = 3600 * 24 * 3
    timerWheelEnable: bool = True
    timerStopEnqueue: bool = False
    timerCheckMetricsWhen: str = "05"
    timerSkipUnknownError: bool = False
    timerWarmEnable: bool = False
    timerStopDequeue: bool = False
    timerEnableRetryUntilSuccess: bool = False
    timerCongestNumEachSlot: int = 2**31 - 1
    timerMetricSmallThreshold: int = 1000000
    timerProgressLogIntervalMs: int = 10 * 1000

    # --- derived values (the getters of the Java class) ---------------------
    def commit_log_dirs(self) -> list[str]:
        """Writable commit log directories (``storePathCommitLog`` split on ``,``)."""
        text = self.storePathCommitLog or os.path.join(self.storePathRootDir, "commitlog")
        return [p for p in text.split(",") if p]

    def read_only_commit_log_dirs(self) -> list[str]:
        text = self.readOnlyCommitLogStorePaths or ""
        return [p for p in text.split(",") if p]

    def consume_queue_file_size(self) -> int:
        """``getMappedFileSizeConsumeQueue``: rounded up to whole 20-byte entries."""
        n = self.mappedFileSizeConsumeQueue // 20
        return (n + (1 if self.mappedFileSizeConsumeQueue % 20 else 0)) * 20

    def disk_max_used_space_ratio(self) -> int:
        """Clamped to 10..95 as ``getDiskMaxUsedSpaceRatio`` does."""
        return max(10, min(95, self.diskMaxUsedSpaceRatio))

    def is_transient_store_pool_active(self) -> bool:
        return (
            self.transientStorePoolEnable
            and self.flushDiskType is FlushDiskType.ASYNC_FLUSH
            and self.brokerRole is not BrokerRole.SLAVE
        )

    def timer_precision_ms(self) -> int:
        """``setTimerPrecisionMs`` of 5.3.3: the largest of 100/200/500/1000
        not above the setting (100 below that)."""
        chosen = 100
        for c in (200, 500, 1000):
            if self.timerPrecisionMs >= c:
                chosen = c
        return chosen

    def delay_level_table(self) -> dict[int, int]:
        """``messageDelayLevel`` parsed into level -> milliseconds."""
        units = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
        table: dict[int, int] = {}
        for i, token in enumerate(self.messageDelayLevel.split()):
            table[i + 1] = int(token[:-1]) * units[token[-1]]
        return table

    def __post_init__(self) -> None:
        self.normalize()

    def normalize(self) -> None:
        """Turn enum names (as broker.conf gives them) into enums.

        ``apply_properties`` stores the raw text, so the store calls this again
        before use; an unknown name is a ConfigError with one clear line.
        """
        try:
            if isinstance(self.brokerRole, str):
                self.brokerRole = BrokerRole[self.brokerRole.strip()]
            if isinstance(self.flushDiskType, str):
                self.flushDiskType = FlushDiskType[self.flushDiskType.strip()]
        except KeyError as e:
            raise ConfigError(f"bad enum value {e.args[0]!r} for brokerRole/flushDiskType") from None
