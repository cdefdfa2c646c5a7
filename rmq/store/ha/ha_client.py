"""HAClient: the slave's side of the HA stream (4.9.8 ``HAService.HAClient``).

Connects to the master's HA address and reports the slave's commit-log max
offset (the next byte it needs) right after connecting, after every read
that appended data, and every ``haSendHeartbeatInterval``.  Each frame from
the master must start exactly at the slave's max offset (an empty slave
takes whatever offset the master starts at); a mismatch drops the
connection, and the next connection starts again from the slave's own max
offset, so nothing the slave holds is ever overwritten or truncated.  Frames
are appended through the store's HA hook, which dispatches them into the
consume queues and the index.

Without a master address it waits (5 s, or until one is set); a failed
connection is retried after 5 s, a dropped one after 1 s.  Twenty seconds
(``haHousekeepingInterval``) without a byte from the master (it heartbeats
every 5 s) close the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from rmq.common.logging import STORE_LOGGER_NAME
from rmq.store.ha.codec import MAX_FRAME_BODY, FrameReader, HAProtocolError, encode_report

log = logging.getLogger(STORE_LOGGER_NAME)

READ_MAX_BUFFER_SIZE = 4 * 1024 * 1024
CONNECT_TIMEOUT_S = 3.0
RETRY_CONNECT_S = 5.0
RECONNECT_S = 1.0


def parse_address(addr: str) -> tuple[str, int]:
    """``host:port`` (IPv6 hosts in brackets or bare) -> (host, port)."""
    host, sep, port = addr.strip().rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"bad HA master address {addr!r}")
    return host.strip("[]"), int(port)


class HAClient:
    def __init__(self, store: Any) -> None:
        self.store = store
        self.master_address: str | None = None
        self.current_reported_offset = 0
        self.connected = False
        self._address_changed = asyncio.Event()
        self._task: asyncio.Task | None = None

    def update_master_address(self, addr: str | None) -> None:
        """Set the master's HA address; a change reconnects to the new master."""
        if addr == self.master_address:
            return
        log.info("update master address, OLD: %s NEW: %s", self.master_address, addr)
        self.master_address = addr
        self._address_changed.set()

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="HAClient")

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _pause(self, seconds: float) -> None:
        """Sleep, cut short by a new master address."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._address_changed.wait(), seconds)

    async def _run(self) -> None:
        while True:
            addr = self.master_address
            self._address_changed.clear()
            if not addr:
                await self._pause(RETRY_CONNECT_S)
                continue
            try:
                host, port = parse_address(addr)
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(host, port), CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError, ValueError) as exc:
                log.warning("HAClient: connect to master %s failed: %s", addr, exc)
                await self._pause(RETRY_CONNECT_S)
                continue
            log.info("HAClient: connected to master %s", addr)
            self.connected = True
            try:
                await self._session(reader, writer)
            except (OSError, HAProtocolError) as exc:
                log.warning("HAClient: connection to master %s lost: %s", addr, exc)
            finally:
                self.connected = False
                writer.close()
            await self._pause(RECONNECT_S)

    def _report(self, writer: asyncio.StreamWriter, offset: int) -> None:
        writer.write(encode_report(offset))

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection: returns when it must be dropped."""
        store = self.store
        cfg = store.config
        loop = asyncio.get_running_loop()
        frames = FrameReader(MAX_FRAME_BODY)
        heartbeat_s = cfg.haSendHeartbeatInterval / 1000
        idle_s = cfg.haHousekeepingInterval / 1000
        self.current_reported_offset = store.get_max_phy_offset()
        self._report(writer, self.current_reported_offset)
        last_report = last_read = loop.time()
        while not self._address_changed.is_set():
            wait_s = max(0.05, last_report + heartbeat_s - loop.time())
            try:
                data = await asyncio.wait_for(reader.read(READ_MAX_BUFFER_SIZE), wait_s)
            except TimeoutError:
                data = None
            now = loop.time()
            if data is not None:
                if not data:
                    log.info("HAClient: master closed the connection")
                    return
                last_read = now
                if not self._apply(frames.feed(data)):
                    return
                current = store.get_max_phy_offset()
                if current > self.current_reported_offset:
                    self.current_reported_offset = current
                    self._report(writer, current)
                    last_report = now
            if now - last_report >= heartbeat_s:
                self._report(writer, self.current_reported_offset)
                last_report = now
            await writer.drain()
            if now - last_read > idle_s:
                log.warning("HAClient, housekeeping, found this connection[%s] expired, %d ms",
                            self.master_address, int((now - last_read) * 1000))
                return

    def _apply(self, frames: list[tuple[int, bytearray]]) -> bool:
        """Append each frame at its offset; False when the stream no longer lines up."""
        store = self.store
        for master_offset, body in frames:
            slave_offset = store.get_max_phy_offset()
            if slave_offset != 0 and slave_offset != master_offset:
                log.error("master pushed offset not equal the max phy offset in slave, "
                          "SLAVE: %d MASTER: %d", slave_offset, master_offset)
                return False
            if body and not store.append_to_commit_log(master_offset, body):
                log.error("HAClient: append of %d bytes at %d failed", len(body), master_offset)
                return False
        return True
