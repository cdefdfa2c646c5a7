"""One place that configures process logging for rmq servers (name server, broker).

RocketMQ logs through logback to ``<logs>/rocketmqlogs/<component>.log`` with size
based rotation, and prints a few lines (the boot line) to the console.  rmq
does the same with the standard library: every record of the process (the
RocketMQ-named loggers such as ``RocketmqNamesrv`` and ``RocketmqRemoting`` and
any ``rmq.*`` module logger) goes to a rotating file under the log directory,
and -- when the process runs in the foreground -- to the console as well.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
from pathlib import Path

# Logger names of RocketMQ's LoggerName, so operators find the lines they know.
NAMESRV_LOGGER_NAME = "RocketmqNamesrv"
NAMESRV_CONSOLE_NAME = "RocketmqNamesrvConsole"
BROKER_LOGGER_NAME = "RocketmqBroker"
BROKER_CONSOLE_NAME = "RocketmqConsole"
STORE_LOGGER_NAME = "RocketmqStore"
REMOTING_LOGGER_NAME = "RocketmqRemoting"
STATS_LOGGER_NAME = "RocketmqStats"
WATER_MARK_LOGGER_NAME = "RocketmqWaterMark"
TRANSACTION_LOGGER_NAME = "RocketmqTransaction"

LOG_FORMAT = "%(asctime)s %(levelname)-5s %(name)s - %(message)s"
DEFAULT_MAX_BYTES = 128 * 1024 * 1024
DEFAULT_BACKUP_COUNT = 10

_installed: list[logging.Handler] = []


def default_log_dir(rocketmq_home: str | None) -> str:
    """``<rocketmqHome>/logs/rocketmqlogs`` when a home is known, else the user's
    ``~/logs/rocketmqlogs`` (RocketMQ's logback default)."""
    base = Path(rocketmq_home) if rocketmq_home else Path.home()
    return str(base / "logs" / "rocketmqlogs")


def configure_logging(log_dir: str, file_name: str, *, console: bool = True,
                      level: int = logging.INFO, max_bytes: int = DEFAULT_MAX_BYTES,
                      backup_count: int = DEFAULT_BACKUP_COUNT) -> str:
    """Send every log record of the process to ``log_dir/file_name`` (rotating)
    and, if ``console``, to stdout.  Calling it again replaces the handlers it
    installed before.  Returns the log file path; raises OSError when the
    directory cannot be created or the file cannot be opened."""
    os.makedirs(log_dir, exist_ok=True)
    path = os.path.join(log_dir, file_name)
    formatter = logging.Formatter(LOG_FORMAT)
    handlers: list[logging.Handler] = [
        logging.handlers.RotatingFileHandler(path, maxBytes=max_bytes,
                                             backupCount=backup_count, encoding="utf-8")
    ]
    if console:
        handlers.append(logging.StreamHandler(sys.stdout))
    root = logging.getLogger()
    for old in _installed:
        root.removeHandler(old)
        old.close()
    _installed.clear()
    for handler in handlers:
        handler.setFormatter(formatter)
        root.addHandler(handler)
        _installed.append(handler)
    root.setLevel(level)
    return path


def shutdown_logging() -> None:
    """Flush and close the handlers installed by ``configure_logging``."""
    root = logging.getLogger()
    for handler in _installed:
        root.removeHandler(handler)
        handler.close()
    _installed.clear()
