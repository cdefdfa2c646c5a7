"""Configuration: the broker's settings as one properties table (RocketMQ ``Configuration``).

GET_BROKER_CONFIG returns every setting of BrokerConfig, NettyServerConfig,
NettyClientConfig and MessageStoreConfig (plus the file's unknown keys, kept
as 4.9.8 keeps them) with a DataVersion; UPDATE_BROKER_CONFIG applies new
values and rewrites the config file given with ``-c`` (``~/store/config/
broker.properties`` without one) with the .tmp/.bak scheme.
"""

from __future__ import annotations

import dataclasses
import os

from rmq.broker.config_manager import write_file_safely
from rmq.common.data_version import DataVersion
from rmq.common.properties import ConfigError, apply_properties, format_properties


def default_config_path() -> str:
    """``BrokerPathConfigHelper``'s default brokerConfigPath."""
    return os.path.join(os.path.expanduser("~"), "store", "config", "broker.properties")


class Configuration:
    def __init__(self, settings) -> None:
        self.settings = settings
        self.data_version = DataVersion()

    def store_path(self) -> str:
        return self.settings.config_file or default_config_path()

    def all_configs(self) -> dict[str, str]:
        """The file's keys overlaid with every field of the four config objects."""
        from rmq.broker.startup import java_text

        props = dict(self.settings.file_properties)
        for obj in self.settings.objects():
            for f in dataclasses.fields(obj):
                if not f.name.startswith("_"):
                    props[f.name] = java_text(getattr(obj, f.name))
        return props

    def formatted(self) -> str:
        return format_properties(self.all_configs())

    def update(self, props: dict[str, str]) -> list[str]:
        """Apply ``props``; returns the keys whose values cannot be parsed (nothing
        is applied then).  Persists the whole table after a successful update."""
        objects = self.settings.objects()
        invalid: list[str] = []
        for obj in objects:
            probe = dataclasses.replace(obj) if dataclasses.is_dataclass(obj) else obj
            invalid.extend(apply_properties(probe, props)[1])
            normalize = getattr(probe, "normalize", None)
            if normalize is not None:
                try:
                    normalize()
                except ConfigError:
                    invalid.extend(k for k in ("brokerRole", "flushDiskType") if k in props)
        if invalid:
            return invalid
        for obj in objects:
            apply_properties(obj, props)
        normalize = getattr(self.settings.store, "normalize", None)
        if normalize is not None:
            normalize()
        known = {f.name for obj in objects for f in dataclasses.fields(obj)}
        for key, value in props.items():
            if key not in known:
                self.settings.file_properties[key] = value
        self.data_version.next_version()
        self.persist()
        return []

    def persist(self) -> None:
        write_file_safely(self.formatted(), self.store_path())
