"""Configuration: the broker's settings as one properties table (RocketMQ ``Configuration``).

GET_BROKER_CONFIG returns every setting of BrokerConfig, NettyServerConfig,
NettyClientConfig and MessageStoreConfig (plus the file's unknown keys, kept
as 4.9.8 keeps them) with a DataVersion; UPDATE_BROKER_CONFIG applies new
values and rewrites the config file given with ``-c`` (``~/store/config/
broker.properties`` without one) with the .tmp/.bak scheme.

Settings fixed when the broker starts (``START_ONLY_KEYS``: store layout and
role, flush mode, ports, the identity registered with the name servers) are
validated and written to the file and shown by GET_BROKER_CONFIG, but the
running broker and store keep the values they started with; the next start
applies them.  (4.9.8 writes them into the live objects, where e.g. a
switch to SYNC_FLUSH makes every put fail after storing the message.)

Where the ``-c`` file cannot be written (a root-owned ``/etc/rmq`` under the
systemd unit's ``ProtectSystem``), the keys changed at runtime go to
``<storePathRootDir>/config/brokerRuntime.properties`` instead, which the
next start applies over the ``-c`` file; a later successful write of the
``-c`` file takes them in and removes it.  Nothing is changed in memory
unless one of the two was written: 4.9.8 changes the live value first and
then fails to save it, so the change is lost at the next restart.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
from typing import Any

from rmq.common.config_manager import write_file_safely
from rmq.common.data_version import DataVersion
from rmq.common.logging import BROKER_LOGGER_NAME
from rmq.common.properties import (
    ConfigError,
    apply_properties,
    format_properties,
    java_text,
    load_properties,
)

log = logging.getLogger(BROKER_LOGGER_NAME)

# Read once at start-up: changing them under a running broker would break it
# (flush service, store files, listening sockets, name-server registration).
START_ONLY_KEYS = frozenset({
    # BrokerConfig: the identity registered with (and unregistered from) name servers
    "brokerClusterName", "brokerName", "brokerId", "brokerIP1", "brokerIP2",
    # NettyServerConfig
    "listenPort", "bindAddress",
    # MessageStoreConfig: file layout, role, flush and HA services
    "storePathRootDir", "storePathCommitLog", "readOnlyCommitLogStorePaths",
    "mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "enableConsumeQueueExt",
    "mappedFileSizeConsumeQueueExt", "bitMapLengthConsumeQueueExt", "maxHashSlotNum",
    "maxIndexNum", "brokerRole", "flushDiskType", "transientStorePoolEnable",
    "transientStorePoolSize", "haListenPort", "messageDelayLevel",
    # plain ACL: its hook and rule files are set up at start-up, as in 4.9.8
    "aclEnable", "aclPlainFile",
})


RUNTIME_OVERRIDES = "brokerRuntime.properties"
_READ_ONLY = (errno.EACCES, errno.EPERM, errno.EROFS)


def runtime_overrides_path(store_root: str) -> str:
    """Where runtime changes go when the ``-c`` file is not writable."""
    return os.path.join(store_root, "config", RUNTIME_OVERRIDES)


def default_config_path() -> str:
    """``BrokerPathConfigHelper``'s default brokerConfigPath."""
    return os.path.join(os.path.expanduser("~"), "store", "config", "broker.properties")


class Configuration:
    def __init__(self, settings) -> None:
        self.settings = settings
        self.data_version = DataVersion()
        # start-only keys changed at runtime -> their canonical text, for the next start
        self.next_start: dict[str, str] = {}

    def store_path(self) -> str:
        return self.settings.config_file or default_config_path()

    def all_configs(self) -> dict[str, str]:
        """The file's keys overlaid with every field of the four config objects
        and then with the start-only values waiting for the next start."""

        props = dict(self.settings.file_properties)
        for obj in self.settings.objects():
            for f in dataclasses.fields(obj):
                if not f.name.startswith("_"):
                    props[f.name] = java_text(getattr(obj, f.name))
        props.update(self.next_start)
        return props

    def formatted(self) -> str:
        return format_properties(self.all_configs())

    def update(self, props: dict[str, str]) -> list[str]:
        """Apply ``props``; returns the keys whose values cannot be parsed (nothing
        is applied then).  Start-only keys go to the file only.  The change is
        saved first (ConfigError, nothing applied, when it cannot be) and then
        applied."""
        objects = self.settings.objects()
        invalid, probes = self._probe(objects, props)
        if invalid:
            return invalid
        self._save(self._canonical(probes, props))
        live = {k: v for k, v in props.items() if k not in START_ONLY_KEYS}
        for obj in objects:
            apply_properties(obj, live)
        normalize = getattr(self.settings.store, "normalize", None)
        if normalize is not None:
            normalize()
        self._keep_for_next_start(probes, props)
        known = {f.name for obj in objects for f in dataclasses.fields(obj)}
        for key, value in props.items():
            if key not in known:
                self.settings.file_properties[key] = value
        self.data_version.next_version()
        return []

    @staticmethod
    def _canonical(probes: list[Any], props: dict[str, str]) -> dict[str, str]:
        """``props`` as the table will show them once applied (parsed values in
        Java's text; keys no setting declares as given)."""
        out = dict(props)
        for key in props:
            for probe in probes:
                if hasattr(probe, key):
                    out[key] = java_text(getattr(probe, key))
        return out

    def _save(self, changes: dict[str, str]) -> None:
        """The table with ``changes`` into the config file; the changes alone into
        the runtime overrides when that file is read-only; ConfigError if neither."""
        table = self.all_configs()
        table.update(changes)
        path = self.store_path()
        overrides = runtime_overrides_path(self.settings.store.storePathRootDir)
        try:
            write_file_safely(format_properties(table), path)
        except OSError as e:
            if e.errno not in _READ_ONLY:
                raise ConfigError(f"cannot write {path}: {e.strerror}; nothing changed") from None
        else:
            if os.path.exists(overrides):  # taken into the file just written
                os.unlink(overrides)
            return
        try:
            kept = load_properties(overrides) if os.path.exists(overrides) else {}
            kept.update(changes)
            write_file_safely(format_properties(kept), overrides)
        except (OSError, ConfigError) as e:
            raise ConfigError(f"{path} is read-only and {overrides} cannot be written "
                              f"({getattr(e, 'strerror', None) or e}); nothing changed") from None
        log.warning("updateBrokerConfig: %s is read-only; %s saved in %s, applied over it at "
                    "the next start", path, ", ".join(sorted(changes)), overrides)

    @staticmethod
    def _probe(objects, props: dict[str, str]) -> tuple[list[str], list[Any]]:
        """Apply ``props`` to copies of ``objects``: the unparsable keys, and the
        copies (they hold the parsed values of the start-only keys)."""
        invalid: list[str] = []
        probes = []
        for obj in objects:
            probe = dataclasses.replace(obj) if dataclasses.is_dataclass(obj) else obj
            invalid.extend(apply_properties(probe, props)[1])
            normalize = getattr(probe, "normalize", None)
            if normalize is not None:
                try:
                    normalize()
                except ConfigError:
                    invalid.extend(k for k in ("brokerRole", "flushDiskType") if k in props)
            probes.append(probe)
        return invalid, probes

    def _keep_for_next_start(self, probes: list[Any], props: dict[str, str]) -> None:

        deferred = sorted(k for k in props if k in START_ONLY_KEYS)
        for key in deferred:
            for probe in probes:
                if hasattr(probe, key):
                    self.next_start[key] = java_text(getattr(probe, key))
        if deferred:
            log.warning("updateBrokerConfig: %s saved; the running broker keeps its "
                        "start-up values until the next start",
                        ", ".join(f"{k}={self.next_start[k]}" for k in deferred))

