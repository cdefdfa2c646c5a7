"""KVConfigManager: namespaced key/value settings kept by the name server.

Mirrors ``KVConfigManager`` of 4.9.8.  Operators (mqadmin updateKvConfig) and
brokers read them; the well-known namespace ``ORDER_TOPIC_CONFIG`` maps an
order topic to ``brokerName:queueNum;...`` and is sent back to every
registering broker and, with orderMessageEnable, in routes.

Persisted after every change to ``kvConfigPath`` as
``{"configTable":{"<namespace>":{"<key>":"<value>"}}}``, written the way RocketMQ
writes its JSON files: new content to ``<path>.tmp``, the previous file kept as
``<path>.bak``, then the temporary file renamed into place.  Loading falls back
to the ``.bak`` copy when the main file is missing or unreadable.

All methods run on the event loop thread and never await, so each call sees
and leaves a consistent table.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from rmq.common import fastjson
from rmq.common.logging import NAMESRV_LOGGER_NAME
from rmq.common.properties import ConfigError
from rmq.common.route import KVTable

NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"

log = logging.getLogger(NAMESRV_LOGGER_NAME)


def write_file_safely(content: str, path: str) -> None:
    """``MixAll.string2File``: tmp file, previous content to .bak, rename."""
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(content)
        f.flush()
        os.fsync(f.fileno())
    if os.path.exists(path):
        os.replace(path, path + ".bak")
    os.replace(tmp, path)


def _parse_table(text: str, path: str) -> dict[str, dict[str, str]]:
    try:
        obj: Any = fastjson.loads(text)
    except fastjson.FastjsonError as exc:
        raise ConfigError(f"KV config file {path} is not valid JSON: {exc}") from None
    table = obj.get("configTable") if isinstance(obj, dict) else None
    if table is None:
        table = {}
    if not isinstance(table, dict) or not all(
            isinstance(ns, dict) and all(isinstance(v, str) for v in ns.values())
            for ns in table.values()):
        raise ConfigError(f"KV config file {path} does not hold a configTable of strings")
    return {ns: dict(kv) for ns, kv in table.items()}


class KVConfigManager:
    def __init__(self, kv_config_path: str) -> None:
        self.path = kv_config_path
        self.config_table: dict[str, dict[str, str]] = {}
        self.version = 0  # bumped on every change (route caches key on it)

    def load(self) -> None:
        """Read the table; a missing file is an empty table, a corrupt one (with
        no readable .bak) a ConfigError -- refusing to start beats forgetting."""
        errors: list[ConfigError] = []
        for candidate in (self.path, self.path + ".bak"):
            try:
                with open(candidate, encoding="utf-8") as f:
                    text = f.read()
            except FileNotFoundError:
                continue
            except (OSError, UnicodeDecodeError) as exc:
                errors.append(ConfigError(f"cannot read KV config file {candidate}: {exc}"))
                continue
            try:
                self.config_table = _parse_table(text, candidate)
            except ConfigError as exc:
                log.warning("%s", exc)
                errors.append(exc)
                continue
            log.info("load KV config table OK, %s", candidate)
            return
        if errors:
            raise errors[0]

    def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        table = self.config_table.setdefault(namespace, {})
        prev = table.get(key)
        table[key] = value
        self.version += 1
        if prev is None:
            log.info("putKVConfig create new config item, Namespace: %s Key: %s Value: %s",
                     namespace, key, value)
        else:
            log.info("putKVConfig update config item, Namespace: %s Key: %s Value: %s",
                     namespace, key, value)
        self.persist()

    def delete_kv_config(self, namespace: str, key: str) -> None:
        table = self.config_table.get(namespace)
        if table is not None:
            value = table.pop(key, None)
            self.version += 1
            log.info("deleteKVConfig delete a config item, Namespace: %s Key: %s Value: %s",
                     namespace, key, value)
        self.persist()

    def get_kv_config(self, namespace: str, key: str) -> str | None:
        table = self.config_table.get(namespace)
        return None if table is None else table.get(key)

    def get_kv_list_by_namespace(self, namespace: str) -> bytes | None:
        """KVTable JSON of a namespace, or None when it does not exist."""
        table = self.config_table.get(namespace)
        return None if table is None else KVTable(table).encode()

    def encode(self) -> str:
        return fastjson.dumps({"configTable": self.config_table}).decode("utf-8")

    def persist(self) -> None:
        try:
            write_file_safely(self.encode(), self.path)
        except OSError as exc:
            log.error("persist kvconfig Exception, %s: %s", self.path, exc)

    def print_all_periodically(self) -> None:
        log.info("--------------------------------------------------------")
        log.info("configTable SIZE: %d", len(self.config_table))
        for ns, table in self.config_table.items():
            for key, value in table.items():
                log.info("configTable NS: %s Key: %s Value: %s", ns, key, value)

