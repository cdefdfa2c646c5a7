"""NamesrvConfig: the name server's own settings (``NamesrvConfig`` of 4.9.8).

Field names are the property names of namesrv.conf.  Two rmq additions make
broker liveness tunable (Java hard-codes them), so tests and small deployments
can shorten them; ``logDir`` places the rotating log file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from rmq.common.logging import default_log_dir
from rmq.common.metrics_http import exporter_type_error

ROCKETMQ_HOME_ENV = "ROCKETMQ_HOME"
ROCKETMQ_HOME_PROPERTY = "rocketmq.home.dir"
# Keys UPDATE_NAMESRV_CONFIG may never change, whatever configBlackList says.
FIXED_BLACK_LIST = ("configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome")


def installation_dir() -> str:
    """The directory rmq is installed in (the one holding ``conf/``)."""
    return str(Path(__file__).resolve().parents[2])


def _default_home() -> str:
    return (os.environ.get(ROCKETMQ_HOME_PROPERTY) or os.environ.get(ROCKETMQ_HOME_ENV)
            or installation_dir())


def _user_home_path(*parts: str) -> str:
    return os.path.join(str(Path.home()), *parts)


@dataclass(slots=True)
class NamesrvConfig:
    rocketmqHome: str = field(default_factory=_default_home)
    kvConfigPath: str = field(
        default_factory=lambda: _user_home_path("namesrv", "kvConfig.json"))
    configStorePath: str = field(
        default_factory=lambda: _user_home_path("namesrv", "namesrv.properties"))
    productEnvName: str = "center"
    clusterTest: bool = False
    orderMessageEnable: bool = False
    configBlackList: str = "configBlackList;configStorePath;kvConfigPath"
    # rmq additions: broker liveness (Java: 120 s expiry, scan every 10 s)
    brokerChannelExpiredMillis: int = 120_000
    scanNotActiveBrokerIntervalMillis: int = 10_000
    # rmq addition: a Prometheus endpoint as the broker's (RocketMQ 5 setting names)
    metricsExporterType: str = "DISABLE"
    metricsPromExporterHost: str = ""
    metricsPromExporterPort: int = 5557
    # rmq addition: where namesrv.log goes ("" = <rocketmqHome>/logs/rocketmqlogs)
    logDir: str = ""

    def effective_log_dir(self) -> str:
        return self.logDir or default_log_dir(self.rocketmqHome)

    def black_list(self) -> set[str]:
        keys = set(FIXED_BLACK_LIST)
        keys.update(k.strip() for k in self.configBlackList.split(";") if k.strip())
        return keys

    def validate(self) -> list[str]:
        """Problems with the values (each one line for the operator)."""
        problems = []
        if self.brokerChannelExpiredMillis <= 0:
            problems.append("brokerChannelExpiredMillis must be > 0")
        if self.scanNotActiveBrokerIntervalMillis <= 0:
            problems.append("scanNotActiveBrokerIntervalMillis must be > 0")
        if not self.kvConfigPath:
            problems.append("kvConfigPath must not be empty")
        exporter = exporter_type_error(self.metricsExporterType)
        if exporter is not None:
            problems.append(exporter)
        return problems
