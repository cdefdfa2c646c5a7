"""HAService: commit-log replication between a master and its slaves (4.9.8 ``HAService``).

Runs on the broker's event loop.  On a master it accepts slaves on
``haListenPort`` (listenPort + 1) and serves each with an ``HAConnection``;
it tracks the highest offset any slave acknowledged (``push2SlaveMaxOffset``)
and lets SYNC_MASTER sends wait for it (``GroupTransferService``).  On a
slave it runs the ``HAClient`` towards the master's HA address, set from
``haMasterAddress`` or learnt from the name server's registration answer.

The store calls ``is_slave_ok(offset)`` and ``await wait_transfer(offset,
slaveTimeout)`` after a SYNC_MASTER put (``store.ha_service``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from rmq.common.logging import STORE_LOGGER_NAME
from rmq.common.net import listen_error
from rmq.store.config import BrokerRole
from rmq.store.ha.group_transfer import GroupTransferService
from rmq.store.ha.ha_client import HAClient
from rmq.store.ha.ha_connection import HAConnection

log = logging.getLogger(STORE_LOGGER_NAME)


class HAService:
    # ``data_waiter`` slotted: each put's arrival notice (rmq._fast.arrival)
    # reads it at its slot to tell whether a writer waits; the rest in the dict
    __slots__ = ("data_waiter", "__dict__", "__weakref__")

    def __init__(self, store: Any, bind_address: str = "0.0.0.0") -> None:
        self.store = store
        self.bind_address = bind_address
        self.connections: set[HAConnection] = set()
        self.ha_client = HAClient(store)
        self.group_transfer: GroupTransferService | None = None
        self._server: asyncio.Server | None = None
        self._conn_tasks: set[asyncio.Task] = set()
        # the writers' future while they wait for new data (None when none waits);
        # the broker skips telling this service of arrivals while it is None
        self.data_waiter: asyncio.Future | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def is_master(self) -> bool:
        return self.store.config.brokerRole is not BrokerRole.SLAVE

    @property
    def push2slave_max_offset(self) -> int:
        """Highest offset any slave has acknowledged since start."""
        return self.group_transfer.acked if self.group_transfer is not None else 0

    # ---- life cycle -------------------------------------------------------------------
    async def start(self) -> None:
        """Masters listen for slaves; slaves start the client (idle until a master address is known)."""
        self._loop = asyncio.get_running_loop()
        self.group_transfer = GroupTransferService(self._loop)
        if self.is_master:
            port = self.store.config.haListenPort
            try:
                self._server = await asyncio.start_server(
                    self._on_slave, self.bind_address, port, reuse_address=True)
            except OSError as exc:
                raise listen_error(exc, self.bind_address, port) from None
            log.info("HAService: listening for slaves on %s:%d", self.bind_address, port)
        else:
            await self.ha_client.start()

    async def shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close()
        await asyncio.gather(*self._conn_tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        await self.ha_client.shutdown()
        if self.group_transfer is not None:
            self.group_transfer.shutdown()

    async def _on_slave(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = HAConnection(self, reader, writer)
        log.info("HAService receive new connection, %s", conn.client_addr)
        task = asyncio.current_task()
        self._conn_tasks.add(task)
        self.connections.add(conn)
        try:
            await conn.run()
        finally:
            self.connections.discard(conn)
            self._conn_tasks.discard(task)

    # ---- master: acknowledgements ----------------------------------------------------------
    def notify_transfer_some(self, offset: int) -> None:
        """A slave acknowledged ``offset``: resolve the sends it covers."""
        if self.group_transfer is not None:
            self.group_transfer.notify_transfer_some(offset)

    def is_slave_ok(self, master_put_where: int) -> bool:
        """A slave is connected and lags less than ``haSlaveFallbehindMax``."""
        return bool(self.connections) and \
            master_put_where - self.push2slave_max_offset < self.store.config.haSlaveFallbehindMax

    def wait_transfer(self, offset: int, timeout_ms: int) -> asyncio.Future:
        """Awaitable: True once a slave acknowledged ``offset``, False after ``timeout_ms``."""
        self.wakeup()
        return self.group_transfer.wait(offset, timeout_ms)

    def slave_fall_behind_much(self) -> int:
        """Bytes the slaves still miss (4.9.8 ``slaveFallBehindMuch``)."""
        return self.store.get_max_phy_offset() - self.push2slave_max_offset

    # ---- master: new data for the writers ---------------------------------------------------
    def data_signal(self) -> asyncio.Future:
        """A future completed at the next put (writers wait on it when caught up)."""
        fut = self.data_waiter
        if fut is None:
            fut = self.data_waiter = self._loop.create_future()
        return fut

    def wakeup(self) -> None:
        fut = self.data_waiter
        if fut is not None:
            self.data_waiter = None
            if not fut.done():
                fut.set_result(None)

    def on_message_arriving(self, *_args: Any) -> None:
        """Store arrival listener (called per dispatched message): wake the writers."""
        if self.data_waiter is not None:
            self.wakeup()

    def on_message_runs(self, _runs: list[tuple]) -> None:
        """The same for a read's runs of messages: one wake-up."""
        if self.data_waiter is not None:
            self.wakeup()

    # ---- slave --------------------------------------------------------------------------
    def update_master_address(self, addr: str) -> None:
        self.ha_client.update_master_address(addr)
