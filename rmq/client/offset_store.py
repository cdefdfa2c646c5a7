"""Consumer offset stores (``RemoteBrokerOffsetStore`` for clustering,
``LocalFileOffsetStore`` for broadcasting).

The in-memory table always holds the next offset to consume per queue; the
remote store commits it to the broker (oneway every 5 s and on shutdown), the
local store writes ``offsets.json`` in the OffsetSerializeWrapper shape.
"""

from __future__ import annotations

import enum
import os
from pathlib import Path
from typing import Protocol

import orjson

from rmq.client.exceptions import MQBrokerError
from rmq.client.message import MessageQueue


class ReadOffsetType(enum.Enum):
    READ_FROM_MEMORY = 0
    READ_FROM_STORE = 1
    MEMORY_FIRST_THEN_STORE = 2


class OffsetBackend(Protocol):
    """What the remote store needs from the client API (one broker call each)."""

    async def query_consumer_offset(self, group: str, mq: MessageQueue) -> int: ...

    async def update_consumer_offset(self, group: str, mq: MessageQueue, offset: int,
                                     oneway: bool) -> None: ...


class OffsetStore:
    """The shared in-memory part: ``update`` / ``read`` / ``remove``."""

    def __init__(self, group: str) -> None:
        self.group = group
        self.table: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        if increase_only:
            if offset > self.table.get(mq, -1):
                self.table[mq] = offset
        else:
            self.table[mq] = offset

    def remove(self, mq: MessageQueue) -> None:
        self.table.pop(mq, None)

    def clone_table(self, topic: str) -> dict[MessageQueue, int]:
        return {mq: o for mq, o in self.table.items() if mq.topic == topic}

    async def load(self) -> None:  # pragma: no branch - overridden where meaningful
        return None

    async def read(self, mq: MessageQueue, how: ReadOffsetType) -> int:
        raise NotImplementedError

    def read_from_memory(self, mq: MessageQueue, how: ReadOffsetType) -> int | None:
        """The answer ``read`` gives without the backing store: the cached offset
        unless READ_FROM_STORE, -1 for READ_FROM_MEMORY with nothing cached, else None."""
        if how is not ReadOffsetType.READ_FROM_STORE:
            off = self.table.get(mq)
            if off is not None:
                return off
            if how is ReadOffsetType.READ_FROM_MEMORY:
                return -1
        return None

    async def persist_all(self, mqs: set[MessageQueue], oneway: bool = True) -> None:
        raise NotImplementedError

    async def persist(self, mq: MessageQueue) -> None:
        raise NotImplementedError


class RemoteBrokerOffsetStore(OffsetStore):
    """Offsets live on the broker; -1 = none stored, -2 = broker unreachable."""

    def __init__(self, group: str, backend: OffsetBackend) -> None:
        super().__init__(group)
        self.backend = backend

    async def read(self, mq: MessageQueue, how: ReadOffsetType) -> int:
        cached = self.read_from_memory(mq, how)
        if cached is not None:
            return cached
        try:
            off = await self.backend.query_consumer_offset(self.group, mq)
        except MQBrokerError:  # QUERY_NOT_FOUND or any other answer: nothing stored
            return -1
        except Exception:  # timeout / connection: skip this queue for now
            return -2
        self.update(mq, off)
        return off

    async def persist_all(self, mqs: set[MessageQueue], oneway: bool = True) -> None:
        for mq, off in list(self.table.items()):
            if mq in mqs:
                await self._commit(mq, off, oneway)

    async def persist(self, mq: MessageQueue) -> None:
        off = self.table.get(mq)
        if off is not None:
            await self._commit(mq, off, oneway=False)

    async def _commit(self, mq: MessageQueue, off: int, oneway: bool) -> None:
        try:
            await self.backend.update_consumer_offset(self.group, mq, off, oneway)
        except Exception:  # next period retries; a lost commit only means redelivery
            pass


def default_offset_dir() -> str:
    return os.environ.get("rocketmq.client.localOffsetStoreDir",
                          str(Path.home() / ".rocketmq_offsets"))


class LocalFileOffsetStore(OffsetStore):
    """Broadcasting offsets in ``<dir>/<clientId>/<group>/offsets.json``."""

    def __init__(self, group: str, client_id: str, base_dir: str | None = None) -> None:
        super().__init__(group)
        self.path = Path(base_dir or default_offset_dir()) / client_id / group / "offsets.json"

    async def load(self) -> None:
        for candidate in (self.path, self.path.with_suffix(".json.bak")):
            try:
                data = orjson.loads(candidate.read_bytes())
            except (OSError, orjson.JSONDecodeError):
                continue
            for key, off in (data.get("offsetTable") or {}).items():
                self.table[MessageQueue.from_json_obj(orjson.loads(key))] = int(off)
            return

    async def read(self, mq: MessageQueue, how: ReadOffsetType) -> int:
        cached = self.read_from_memory(mq, how)
        if cached is not None:
            return cached
        await self.load()
        return self.table.get(mq, -1)

    async def persist_all(self, mqs: set[MessageQueue], oneway: bool = True) -> None:
        table = {mq.key(): off for mq, off in self.table.items() if mq in mqs}
        if not table:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = orjson.dumps({"offsetTable": table}, option=orjson.OPT_SORT_KEYS)
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_bytes(data)
        if self.path.exists():
            os.replace(self.path, self.path.with_suffix(".json.bak"))
        os.replace(tmp, self.path)

    async def persist(self, mq: MessageQueue) -> None:
        await self.persist_all(set(self.table))
