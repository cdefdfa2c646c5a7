"""rmq-broker: the broker's command line (RocketMQ ``BrokerStartup``).

Sequence kept from 4.9.8: defaults (listenPort 10911) -> ``-c`` file applied
to BrokerConfig, NettyServerConfig, NettyClientConfig and MessageStoreConfig
-> command-line options applied to BrokerConfig -> checks (ROCKETMQ_HOME, name
server addresses, role vs brokerId) -> haListenPort = listenPort + 1 -> ``-p``
/ ``-m`` -> controller initialize (failure: exit -3) -> start (failure: exit
-1) -> wait for SIGTERM/SIGINT -> orderly shutdown.

Exit statuses are the shell's view of Java's ``System.exit`` codes: 0 for
``-h``/``-p``/``-m``, 1 for a command-line error, 255 (-1) for a start
failure, 254 (-2) without ROCKETMQ_HOME, 253 (-3) for a bad name server
address, a slave with brokerId <= 0, an unsupported or unparsable setting or
an initialisation failure.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import enum
import gc
import ipaddress
import logging
import logging.handlers
import os
import signal
import sys
from dataclasses import dataclass, field
from typing import Any, NoReturn

from rmq.broker.config import IMPORTANT_FIELDS as BROKER_IMPORTANT
from rmq.broker.config import BrokerConfig
from rmq.broker.configuration import runtime_overrides_path
from rmq.common import systemd
from rmq.common.logging import (
    DEFAULT_BACKUP_COUNT,
    DEFAULT_MAX_BYTES,
    LOG_FORMAT,
    STATS_LOGGER_NAME,
    STORE_LOGGER_NAME,
    WATER_MARK_LOGGER_NAME,
    configure_logging,
    default_log_dir,
)
from rmq.common.properties import (
    ConfigError,
    apply_properties,
    check_unknown_keys,
    java_text,
    load_properties,
)

EXIT_PARSE = 1
EXIT_START = 255  # Java -1
EXIT_NO_HOME = 254  # Java -2
EXIT_INVALID = 253  # Java -3

DEFAULT_LISTEN_PORT = 10911

# MessageStoreConfig properties 4.9.8 marks @ImportantField (printed by -m);
# the Netty configs have none.
STORE_IMPORTANT = frozenset(
    {
        "storePathRootDir",
        "storePathCommitLog",
        "storePathDLedgerCommitLog",
        "flushIntervalCommitLog",
        "commitIntervalCommitLog",
        "flushCommitLogTimed",
        "deleteWhen",
        "fileReservedTime",
        "maxTransferBytesOnMessageInMemory",
        "maxTransferCountOnMessageInMemory",
        "maxTransferBytesOnMessageInDisk",
        "maxTransferCountOnMessageInDisk",
        "accessMessageInMemoryMaxRatio",
        "messageIndexEnable",
        "messageIndexSafe",
        "haMasterAddress",
        "brokerRole",
        "flushDiskType",
        "cleanFileForciblyEnable",
        "transientStorePoolEnable",
    }
)

# 4.9.8 keys that are not config-object fields but are read from the file
# (address-server system properties).
KNOWN_EXTRA_KEYS = frozenset({"rmqAddressServerDomain", "rmqAddressServerSubGroup"})

USAGE_NAME = "mqbroker"


class StartupExit(Exception):
    """Leave start-up with ``code`` after printing ``message`` (one line)."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _Parser(argparse.ArgumentParser):
    """commons-cli behaviour: a parse error prints the usage and exits 1."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: {message}\n")
        self.print_help(sys.stderr)
        raise StartupExit(EXIT_PARSE)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=USAGE_NAME, add_help=False,
                description="Start an rmq broker (RocketMQ 4.9.8 compatible).")
    p.add_argument("-c", "--configFile", metavar="file", help="Broker config properties file")
    p.add_argument("-n", "--namesrvAddr", metavar="addr",
                   help="Name server address list, eg: '192.168.0.1:9876;192.168.0.2:9876'")
    p.add_argument("-p", "--printConfigItem", action="store_true", help="Print all config item")
    p.add_argument("-m", "--printImportantConfig", action="store_true",
                   help="Print important config item")
    p.add_argument("--strict", action="store_true",
                   help="Refuse config keys that no setting declares (default: warn)")
    p.add_argument("-h", "--help", action="store_true", help="Print help")
    return p


@dataclass(slots=True)
class BrokerSettings:
    """Everything the command line and the config file decided."""

    broker: BrokerConfig
    server: Any  # rmq.remoting.config.NettyServerConfig
    client: Any  # rmq.remoting.config.NettyClientConfig
    store: Any  # rmq.store MessageStoreConfig
    config_file: str | None = None
    # every key of the file, known or not: re-written when the config is persisted
    file_properties: dict[str, str] = field(default_factory=dict)

    def objects(self) -> tuple[Any, ...]:
        return (self.broker, self.server, self.client, self.store)

    def fast_port(self) -> int:
        """The VIP channel: always listenPort - 2."""
        return self.server.listenPort - 2


def default_settings() -> BrokerSettings:
    """4.9.8 defaults as BrokerStartup creates them (listenPort 10911)."""
    from rmq.remoting.config import NettyClientConfig, NettyServerConfig
    from rmq.store.config import MessageStoreConfig

    server = NettyServerConfig()
    server.listenPort = DEFAULT_LISTEN_PORT
    return BrokerSettings(BrokerConfig(), server, NettyClientConfig(), MessageStoreConfig())


def enum_name(value: Any) -> str:
    """The Java enum constant name of a setting (works for enums and strings)."""
    return value.name if isinstance(value, enum.Enum) else str(value)


def apply_file(settings: BrokerSettings, path: str, strict: bool = False) -> None:
    """Apply a properties file to the four config objects, as 4.9.8 does.

    A value that cannot be converted for a known key is refused (4.9.8 keeps
    the default silently; rmq names the key so a typo cannot go unnoticed).
    Unknown keys are kept for re-writing and reported on stderr, or refused
    in strict mode (``--strict`` or ``strictConfig=true``).
    """
    props = load_properties(path)
    invalid: list[str] = []
    for obj in settings.objects():
        _, bad = apply_properties(obj, props)
        invalid.extend(bad)
    if invalid:
        key = invalid[0]
        raise StartupExit(EXIT_INVALID,
                          f"config file {path}: the value {props[key]!r} of {key} cannot be parsed")
    try:
        settings.store.normalize()
    except ConfigError as exc:
        raise StartupExit(EXIT_INVALID, f"config file {path}: {exc}") from None
    try:
        warnings = check_unknown_keys(path, props, settings.objects(), strict, KNOWN_EXTRA_KEYS)
    except ConfigError as exc:
        raise StartupExit(EXIT_INVALID, str(exc)) from None
    for warning in warnings:
        print(warning, file=sys.stderr)
    if settings.config_file is None:
        settings.config_file = path
    settings.file_properties.update(props)


def apply_runtime_overrides(settings: BrokerSettings, strict: bool) -> None:
    """Settings changed with updateBrokerConfig while the ``-c`` file was
    read-only (see rmq.broker.configuration): applied over it."""
    path = runtime_overrides_path(settings.store.storePathRootDir)
    if os.path.exists(path):
        apply_file(settings, path, strict)
        print(f"runtime settings from {path} applied over {settings.config_file}",
              file=sys.stderr)


def check_namesrv_addr(addr: str) -> bool:
    """``RemotingUtil.string2SocketAddress`` for every ``;``-separated entry."""
    parts = addr.split(";")
    while parts and parts[-1] == "":  # Java's split drops trailing empty strings
        parts.pop()
    if not parts:
        return False
    for part in parts:
        host, sep, port = part.rpartition(":")
        if not sep or not host or not port.isdigit() or int(port) > 65535:
            return False
        if host.startswith("[") and host.endswith("]"):
            try:
                ipaddress.IPv6Address(host[1:-1])
            except ValueError:
                return False
    return True


def validate(settings: BrokerSettings) -> None:
    """The checks of BrokerStartup, in its order, plus the derived ports."""
    broker, store = settings.broker, settings.store
    if broker.rocketmqHome is None:
        raise StartupExit(EXIT_NO_HOME,
                          "Please set the ROCKETMQ_HOME variable in your environment to match "
                          "the location of the RocketMQ installation")
    if broker.namesrvAddr is not None and not check_namesrv_addr(broker.namesrvAddr):
        raise StartupExit(
            EXIT_INVALID,
            f"The Name Server Address[{broker.namesrvAddr}] illegal, please set it as follows, "
            f"\"127.0.0.1:9876;192.168.0.1:9876\"")
    role = enum_name(store.brokerRole)
    if role in ("ASYNC_MASTER", "SYNC_MASTER"):
        broker.brokerId = 0
    elif role == "SLAVE":
        if broker.brokerId <= 0:
            raise StartupExit(EXIT_INVALID, "Slave's brokerId must be > 0")
    else:
        raise StartupExit(EXIT_INVALID,
                          f"brokerRole {role} is not one of ASYNC_MASTER, SYNC_MASTER, SLAVE")
    if store.enableDLegerCommitLog:
        check_dledger(store)
        broker.brokerId = -1  # master or slave as the group decides (BrokerStartup)
    else:
        check_no_dledger_store(store)
    port = settings.server.listenPort
    if not 3 <= port <= 65534:
        raise StartupExit(EXIT_INVALID,
                          f"listenPort {port} out of range: the fast port (listenPort-2) and the "
                          f"HA port (listenPort+1) must be valid ports too")
    store.haListenPort = port + 1
    check_store_sizes(store)
    check_request_queues(broker)


def check_dledger(store: Any) -> None:
    """A DLedger broker: a group that can work, and no commit log of the
    other mode under its store (nothing is read or overwritten then)."""
    from rmq.dledger.commit_log import dledger_config
    from rmq.dledger.config import DLedgerConfigError

    try:
        dledger_config(store)
    except DLedgerConfigError as exc:
        raise StartupExit(EXIT_INVALID, str(exc)) from None
    if store.enableMultiDispatch or store.enableLmq:
        raise StartupExit(EXIT_INVALID, "enableMultiDispatch/enableLmq are not supported with "
                          "enableDLegerCommitLog=true in rmq")
    for d in store.commit_log_dirs():
        if os.path.isdir(d) and any(n.isdigit() for n in os.listdir(d)):
            raise StartupExit(EXIT_INVALID,
                              f"enableDLegerCommitLog=true but {d} holds a commit log written "
                              "without DLedger: use a new storePathRootDir")


def check_no_dledger_store(store: Any) -> None:
    root = store.storePathRootDir
    if os.path.isdir(root):
        found = sorted(n for n in os.listdir(root) if n.startswith("dledger-"))
        if found:
            raise StartupExit(EXIT_INVALID,
                              f"{os.path.join(root, found[0])} holds a DLedger commit log: "
                              "set enableDLegerCommitLog=true or use a new storePathRootDir")


# the smallest commit-log file rmq maps: one page
MIN_COMMIT_LOG_FILE = 4096


def check_store_sizes(store: Any) -> None:
    """File and index sizes the store cannot work with are refused at start:
    4.9.8 starts with them and then fails every put (a division by zero for
    an empty consume-queue file, a full or slotless index file, commit-log
    files too small for any message)."""
    from rmq.store.consume_queue import CQ_STORE_UNIT_SIZE

    if store.mappedFileSizeCommitLog < MIN_COMMIT_LOG_FILE:
        raise StartupExit(EXIT_INVALID,
                          f"mappedFileSizeCommitLog {store.mappedFileSizeCommitLog} is too small: "
                          f"a commit log file is at least {MIN_COMMIT_LOG_FILE} bytes")
    if store.consume_queue_file_size() < CQ_STORE_UNIT_SIZE:
        raise StartupExit(EXIT_INVALID,
                          f"mappedFileSizeConsumeQueue {store.mappedFileSizeConsumeQueue} is too "
                          f"small: a consume queue file holds at least one {CQ_STORE_UNIT_SIZE}-byte "
                          f"entry")
    for name in ("maxHashSlotNum", "maxIndexNum"):
        if getattr(store, name) < 1:
            raise StartupExit(EXIT_INVALID,
                              f"{name} {getattr(store, name)} is too small: an index file needs "
                              f"at least one hash slot and one entry")


def check_request_queues(broker: BrokerConfig) -> None:
    """Every request queue needs room for one request and one worker: 4.9.8
    fails at start too, when its thread pools refuse a size or capacity under
    one."""
    from rmq.broker.controller import QUEUE_CAPACITIES, QUEUE_WORKERS

    names = [p for p in QUEUE_CAPACITIES.values() if p] + list(QUEUE_WORKERS.values())
    for name in names:
        value = getattr(broker, name)
        if value < 1:
            raise StartupExit(EXIT_INVALID, f"{name} {value} is too small: at least 1")


def format_config(settings: BrokerSettings, important_only: bool) -> str:
    """``key=value`` lines of the four objects in declaration order (``-p``/``-m``)."""
    lines: list[str] = []
    for obj, important in ((settings.broker, BROKER_IMPORTANT), (settings.server, frozenset()),
                           (settings.client, frozenset()), (settings.store, STORE_IMPORTANT)):
        for f in dataclasses.fields(obj):
            if f.name.startswith("_") or (important_only and f.name not in important):
                continue
            lines.append(f"{f.name}={java_text(getattr(obj, f.name))}")
    return "\n".join(lines) + "\n"


def parse(argv: list[str]) -> tuple[argparse.Namespace, BrokerSettings]:
    """Command line and config file -> validated settings (raises StartupExit)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.help:
        parser.print_help(sys.stdout)
        raise StartupExit(0)
    settings = default_settings()
    if args.configFile:
        try:
            apply_file(settings, args.configFile, args.strict)
            apply_runtime_overrides(settings, args.strict)
        except ConfigError as exc:
            raise StartupExit(EXIT_START, str(exc)) from None
    if args.namesrvAddr is not None:
        settings.broker.namesrvAddr = args.namesrvAddr
    validate(settings)
    return args, settings


def prepare_store_paths(settings: BrokerSettings) -> None:
    """Create the store root and its config directory (a clear error if not possible)."""
    root = settings.store.storePathRootDir
    try:
        os.makedirs(os.path.join(root, "config"), exist_ok=True)
        commitlog = getattr(settings.store, "storePathCommitLog", None)
        for path in (commitlog or "").split(","):
            if path.strip():
                os.makedirs(path.strip(), exist_ok=True)
    except OSError as exc:
        raise StartupExit(EXIT_INVALID, f"cannot create store directory {root}: {exc.strerror}") from None


def setup_logging(settings: BrokerSettings) -> str:
    """broker.log for everything, plus store.log, stats.log and watermark.log for
    their RocketMQ loggers, all rotating, under ``<rocketmqHome>/logs/rocketmqlogs``
    (``brokerName_brokerId`` below it with isolateLogEnable).  The console gets
    the records too when it is a terminal or the journal (systemd)."""
    bc = settings.broker
    log_dir = default_log_dir(bc.rocketmqHome)
    if bc.isolateLogEnable:
        log_dir = os.path.join(log_dir, f"{bc.brokerName}_{bc.brokerId}")
    console = sys.stdout.isatty() or "JOURNAL_STREAM" in os.environ
    path = configure_logging(log_dir, "broker.log", console=console)
    formatter = logging.Formatter(LOG_FORMAT)
    # the store modules log as "store"; RocketMQ's name is RocketmqStore
    for name, file_name in ((STORE_LOGGER_NAME, "store.log"), ("store", "store.log"),
                            (STATS_LOGGER_NAME, "stats.log"),
                            (WATER_MARK_LOGGER_NAME, "watermark.log")):
        handler = logging.handlers.RotatingFileHandler(
            os.path.join(log_dir, file_name), maxBytes=DEFAULT_MAX_BYTES,
            backupCount=DEFAULT_BACKUP_COUNT, encoding="utf-8")
        handler.setFormatter(formatter)
        logger = logging.getLogger(name)
        for old in [h for h in logger.handlers if isinstance(h, logging.FileHandler)]:
            logger.removeHandler(old)
            old.close()
        logger.addHandler(handler)
        logger.propagate = False
    return path


def settle_gc() -> None:
    """Collect once and freeze what initialization built (modules, configs,
    tables, the loaded store) out of the collector's sight, before the broker
    serves anyone: a later full collection walks only what was
    allocated since, instead of pausing the loop ~15 ms or more over objects
    that live as long as the process."""
    gc.collect()
    gc.freeze()


async def serve(settings: BrokerSettings) -> int:
    """Initialize, start, and run the controller until SIGTERM/SIGINT."""
    from rmq.broker.controller import BrokerController

    try:
        setup_logging(settings)
    except OSError as exc:
        print(f"cannot open the broker logs: {exc}", file=sys.stderr)
        return EXIT_START

    from rmq.store import StoreLockedError

    controller = BrokerController(settings)
    try:
        ok = await controller.initialize()
    except StoreLockedError as exc:  # another broker runs on this store: a start failure
        print(f"broker start failed: {exc}", file=sys.stderr)
        await controller.shutdown()
        return EXIT_START
    except Exception as exc:  # any init failure: exit -3 with its reason
        controller.log.exception("broker initialize failed")
        print(f"broker initialize failed: {exc}", file=sys.stderr)
        ok = False
    if not ok:
        await controller.shutdown()
        return EXIT_INVALID
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = {"count": 0}

    def on_signal(signame: str) -> None:
        signals["count"] += 1
        controller.log.info("Shutdown hook was invoked, %d (%s)", signals["count"], signame)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig.name)
    settle_gc()
    try:
        await controller.start()
    except Exception as exc:  # any start failure: exit -1 with its reason
        controller.log.exception("broker start failed")
        print(f"broker start failed: {exc}", file=sys.stderr)
        await controller.shutdown()
        return EXIT_START
    tip = controller.boot_line()
    controller.log.info(tip)
    print(tip, flush=True)
    # registration ran inside start(): only now is the broker ready for systemd
    systemd.notify(f"READY=1\nSTATUS={tip}\nMAINPID={os.getpid()}")
    interval = systemd.watchdog_interval()
    watchdog = loop.create_task(systemd.watchdog_loop(interval)) if interval else None
    await stop.wait()
    systemd.notify("STOPPING=1")
    began = loop.time()
    await controller.shutdown()
    if watchdog is not None:
        watchdog.cancel()
    controller.log.info("Shutdown hook over, consuming total time(ms): %d",
                        int((loop.time() - began) * 1000))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``rmq-broker`` / ``python -m rmq.broker.startup``."""
    try:
        args, settings = parse(sys.argv[1:] if argv is None else argv)
        if args.printConfigItem or args.printImportantConfig:
            sys.stdout.write(format_config(settings, important_only=not args.printConfigItem))
            return 0
        prepare_store_paths(settings)
    except StartupExit as exc:
        if exc.message:
            print(exc.message, file=sys.stderr if exc.code else sys.stdout)
        return exc.code
    import uvloop

    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return asyncio.run(serve(settings))


if __name__ == "__main__":
    sys.exit(main())
