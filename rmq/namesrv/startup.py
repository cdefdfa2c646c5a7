"""``rmq-namesrv``: start the name server (``NamesrvStartup`` of 4.9.8).

    rmq-namesrv [-c FILE] [-p] [-n ADDR] [--strict] [-h]

``-c`` reads a properties file applied to NamesrvConfig and NettyServerConfig
(its path becomes configStorePath); ``-p`` prints every effective setting and
exits 0; ``-n`` is accepted and ignored, as in Java.  The listen port defaults
to 9876.  An unknown key is ignored with a warning, as Java ignores it;
``--strict`` (or ``strictConfig=true`` in the file) refuses it.  Unlike Java,
an unparsable value is always refused.

Exit status: 0 after a clean shutdown (SIGTERM / SIGINT) or ``-p`` / ``-h``;
1 for a bad command line or config; 253 (Java's -3) when initialisation fails
(unreadable KV file, log directory); 255 (Java's -1) when the server cannot
start (port already in use).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys

from rmq.common import systemd
from rmq.common.logging import NAMESRV_LOGGER_NAME, configure_logging, shutdown_logging
from rmq.common.properties import (
    ConfigError,
    apply_properties,
    check_unknown_keys,
    config_fields,
    load_properties,
)
from rmq.namesrv.config import NamesrvConfig
from rmq.namesrv.controller import NamesrvController
from rmq.remoting.config import NettyServerConfig

DEFAULT_LISTEN_PORT = 9876
EXIT_CONFIG = 1
EXIT_INIT = 253
EXIT_START = 255

log = logging.getLogger(NAMESRV_LOGGER_NAME)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line and exit 1, like Java's parse error
        self.print_usage(sys.stderr)
        sys.stderr.write(f"rmq-namesrv: {message}\n")
        sys.exit(EXIT_CONFIG)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="rmq-namesrv", description="rmq name server (RocketMQ 4.9.8 compatible)")
    parser.add_argument("-c", "--configFile", metavar="FILE",
                        help="name server config properties file")
    parser.add_argument("-p", "--printConfigItem", action="store_true",
                        help="print all config items and exit")
    parser.add_argument("-n", "--namesrvAddr", metavar="ADDR",
                        help="accepted for compatibility, has no effect")
    parser.add_argument("--strict", action="store_true",
                        help="refuse config keys that no setting declares (default: warn)")
    return parser


def load_config(config_file: str | None, strict: bool = False
                ) -> tuple[NamesrvConfig, NettyServerConfig]:
    """Both settings objects from defaults and ``config_file``; ConfigError
    (one line) for anything wrong."""
    namesrv_config = NamesrvConfig()
    netty_config = NettyServerConfig()
    netty_config.listenPort = DEFAULT_LISTEN_PORT
    if config_file:
        props = load_properties(config_file)
        for warning in check_unknown_keys(config_file, props, (namesrv_config, netty_config),
                                          strict):
            print(warning, file=sys.stderr)
        invalid: set[str] = set()
        for obj in (namesrv_config, netty_config):
            invalid.update(apply_properties(obj, props)[1])
        if invalid:
            raise ConfigError(f"bad value(s) in {config_file}: " + ", ".join(
                f"{k}={props[k]!r}" for k in sorted(invalid)))
        namesrv_config.configStorePath = config_file
        print(f"load config properties file OK, {config_file}")
    problems = namesrv_config.validate()
    if not 0 <= netty_config.listenPort <= 65535:
        problems.append(f"listenPort {netty_config.listenPort} is out of range")
    if problems:
        raise ConfigError("; ".join(problems))
    return namesrv_config, netty_config


def format_config(*objs) -> list[str]:
    lines = []
    for obj in objs:
        for key, value in config_fields(obj).items():
            if isinstance(value, bool):
                value = "true" if value else "false"
            lines.append(f"{key}={'' if value is None else value}")
    return lines


async def serve(controller: NamesrvController) -> int:
    """Run until SIGTERM/SIGINT, then shut down gracefully.  The signals are
    taken before the port opens (as 4.9.8 adds its shutdown hook before
    ``controller.start()``): a SIGTERM as soon as the port answers stops
    the server gracefully rather than killing it."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await controller.start()
    except OSError as exc:  # the server's listen_error names the address
        msg = f"rmq-namesrv: {exc.strerror or exc}"
        log.error(msg)
        print(msg, file=sys.stderr)
        return EXIT_START
    cfg = controller.netty_config
    tip = (f"The Name Server boot success. serializeType=JSON, "
           f"listening on {cfg.bindAddress}:{controller.port}")
    log.info(tip)
    # Type=notify units: ready only once the port is bound; ping the watchdog
    systemd.notify(f"READY=1\nSTATUS={tip}\nMAINPID={os.getpid()}")
    interval = systemd.watchdog_interval()
    watchdog = loop.create_task(systemd.watchdog_loop(interval)) if interval else None
    await stop.wait()
    systemd.notify("STOPPING=1")
    if watchdog is not None:
        watchdog.cancel()
    log.info("shutdown hook was invoked, stopping the name server")
    await controller.shutdown()
    log.info("name server stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        namesrv_config, netty_config = load_config(args.configFile, args.strict)
    except ConfigError as exc:
        print(f"rmq-namesrv: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if args.printConfigItem:
        print("\n".join(format_config(namesrv_config, netty_config)))
        return 0
    try:
        log_file = configure_logging(namesrv_config.effective_log_dir(), "namesrv.log")
    except OSError as exc:
        print(f"rmq-namesrv: cannot open the log directory "
              f"{namesrv_config.effective_log_dir()}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_INIT
    log.info("log file %s", log_file)
    for line in format_config(namesrv_config, netty_config):
        log.info("%s", line)
    controller = NamesrvController(namesrv_config, netty_config)
    try:
        controller.initialize()
    except ConfigError as exc:
        log.error("%s", exc)
        print(f"rmq-namesrv: {exc}", file=sys.stderr)
        return EXIT_INIT
    try:
        import uvloop
        return uvloop.run(serve(controller))
    finally:
        shutdown_logging()


if __name__ == "__main__":
    sys.exit(main())
