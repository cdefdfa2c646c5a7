"""Configuration: the name server's settings as one properties set at run time.

Mirrors RocketMQ's ``Configuration`` as the name server uses it: GET_NAMESRV_CONFIG
answers with every setting of NamesrvConfig and NettyServerConfig as
``key=value`` lines; UPDATE_NAMESRV_CONFIG changes settings in place and
rewrites the whole set to ``configStorePath`` (the ``-c`` file when one was
given, as in Java).  Only settings read per use take effect without a restart
(orderMessageEnable, the liveness timings); the listen port does not move.
"""

from __future__ import annotations

import logging
from typing import Any

from rmq.common.logging import NAMESRV_LOGGER_NAME
from rmq.common.properties import apply_properties, config_fields, format_properties
from rmq.namesrv.kv_config import write_file_safely

log = logging.getLogger(NAMESRV_LOGGER_NAME)


class Configuration:
    def __init__(self, namesrv_config: Any, *others: Any) -> None:
        self.namesrv_config = namesrv_config
        self.objects = (namesrv_config, *others)

    def all_configs(self) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for obj in self.objects:
            merged.update(config_fields(obj))
        return merged

    def format(self) -> str:
        return format_properties(self.all_configs())

    def known(self, key: str) -> bool:
        return any(key in config_fields(obj) for obj in self.objects)

    def update(self, props: dict[str, str]) -> list[str]:
        """Apply ``props`` to every settings object that has them (unknown keys are
        ignored, as Java does); returns the keys whose values did not parse, in
        which case nothing is changed."""
        invalid: list[str] = []
        for obj in self.objects:
            probe = type(obj)(**config_fields(obj))
            invalid.extend(apply_properties(probe, props)[1])
        if invalid:
            return sorted(set(invalid))
        for obj in self.objects:
            apply_properties(obj, props)
        log.info("config updated: %s", props)
        self.persist()
        return []

    def persist(self) -> None:
        path = self.namesrv_config.configStorePath
        try:
            write_file_safely(self.format(), path)
        except OSError as exc:
            log.error("persist config to %s failed: %s", path, exc)
