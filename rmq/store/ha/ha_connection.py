"""HAConnection: the master's side of one slave connection (4.9.8 ``HAConnection``).

Two tasks per slave, as 4.9.8 has two threads:

* the reader takes the slave's 8-byte offset reports; the first one is where
  streaming starts, every one is an acknowledgement (it wakes SYNC_MASTER
  sends); 20 s (``haHousekeepingInterval``) without a byte from the slave, or
  an ack beyond the master's own max offset, ends the connection;
* the writer streams the commit log from that offset in frames of at most
  ``haTransferBatchSize`` bytes, never across a file end, and sends a size-0
  heartbeat after ``haSendHeartbeatInterval`` of silence.  A slave reporting 0
  starts at the beginning of the master's *last* commit-log file, so a new
  slave does not receive the older files (4.9.8 behaviour).

Whichever task ends first ends the other and closes the socket.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from rmq.common.logging import STORE_LOGGER_NAME
from rmq.store.ha.codec import OffsetReportReader, encode_header

if TYPE_CHECKING:
    from rmq.store.ha.ha_service import HAService

log = logging.getLogger(STORE_LOGGER_NAME)

READ_MAX_BUFFER_SIZE = 1024 * 1024
IDLE_POLL_S = 1.0  # upper bound of a writer's sleep when no put woke it


def start_offset_for(request_offset: int, master_max_offset: int, file_size: int) -> int:
    """Where streaming starts: the reported offset, or for a slave reporting 0
    the first byte of the master's last commit-log file."""
    if request_offset != 0:
        return request_offset
    return max(0, master_max_offset - master_max_offset % file_size)


class HAConnection:
    def __init__(self, service: HAService, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.service = service
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.client_addr = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.slave_request_offset = -1
        self.slave_ack_offset = -1
        self.next_transfer_from_where = -1
        self._request_known = asyncio.Event()
        self._tasks: list[asyncio.Task] = []

    async def run(self) -> None:
        """Serve the slave until either side stops; always closes the socket."""
        loop = asyncio.get_running_loop()
        self._tasks = tasks = [
            loop.create_task(self._read_loop(), name=f"HAReadSocketService-{self.client_addr}"),
            loop.create_task(self._write_loop(), name=f"HAWriteSocketService-{self.client_addr}")]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                exc = None if task.cancelled() else task.exception()
                if exc is not None and not isinstance(exc, ConnectionError):
                    log.error("HA connection %s failed: %r", self.client_addr, exc)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.writer.close()
            log.info("HA connection to slave %s closed", self.client_addr)

    def close(self) -> None:
        """End the connection (service shutdown): ``run`` then returns normally."""
        for task in self._tasks:
            task.cancel()

    # ---- slave -> master ------------------------------------------------------------
    async def _read_loop(self) -> None:
        store = self.service.store
        reports = OffsetReportReader()
        idle_s = store.config.haHousekeepingInterval / 1000
        read = self.reader.read
        while True:
            try:
                data = await asyncio.wait_for(read(READ_MAX_BUFFER_SIZE), idle_s)
            except TimeoutError:
                log.warning("ha housekeeping, found this connection[%s] expired, %d ms",
                            self.client_addr, store.config.haHousekeepingInterval)
                return
            if not data:
                return
            offset = reports.feed(data)
            if offset is None:
                continue
            self.slave_ack_offset = offset
            if self.slave_request_offset < 0:
                self.slave_request_offset = offset
                self._request_known.set()
                log.info("slave[%s] request offset %d", self.client_addr, offset)
            elif offset > store.get_max_phy_offset():
                log.warning("slave[%s] request offset=%d greater than local commitLog offset=%d",
                            self.client_addr, offset, store.get_max_phy_offset())
                return
            self.service.notify_transfer_some(offset)

    # ---- master -> slave ------------------------------------------------------------
    async def _write_loop(self) -> None:
        await self._request_known.wait()
        service = self.service
        store = service.store
        cfg = store.config
        nxt = start_offset_for(self.slave_request_offset, store.get_max_phy_offset(),
                               cfg.mappedFileSizeCommitLog)
        self.next_transfer_from_where = nxt
        log.info("master transfer data from %d to slave[%s], and slave request %d",
                 nxt, self.client_addr, self.slave_request_offset)
        loop = asyncio.get_running_loop()
        writer = self.writer
        heartbeat_s = cfg.haSendHeartbeatInterval / 1000
        last_write = loop.time()
        while True:
            batch = cfg.haTransferBatchSize
            data = store.get_commit_log_data(nxt)
            if data is not None:
                try:
                    size = min(len(data), batch)
                    chunk = bytes(data[:size]) if size else b""
                finally:
                    data.release()
                if size:
                    writer.write(encode_header(nxt, size))
                    writer.write(chunk)
                    nxt += size
                    self.next_transfer_from_where = nxt
                    last_write = loop.time()
                    await writer.drain()
                    continue
            now = loop.time()
            if now - last_write >= heartbeat_s:
                writer.write(encode_header(nxt, 0))
                last_write = now
                await writer.drain()
            wake = service.data_signal()
            wait_s = min(IDLE_POLL_S, max(0.0, last_write + heartbeat_s - loop.time()))
            await asyncio.wait((wake,), timeout=wait_s)
