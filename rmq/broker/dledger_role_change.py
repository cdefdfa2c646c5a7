"""DLedgerRoleChangeHandler (4.9.8): the broker follows its DLedger role.

* leader -> master: once every entry the new leader holds is committed and
  dispatched, the topic queue table is rebuilt from the consume queues (queue
  offsets continue where the committed log ends), the broker becomes
  SYNC_MASTER with brokerId 0, starts the schedule and transaction check
  services, and registers with the name servers;
* follower or candidate -> slave: brokerId ``selfId + 1`` (n0 -> 1), the
  services stop, and it registers as a slave (so clients pull from it).

Role events come from the elector on the loop; each is handled in one task,
one at a time, and a handler superseded by a newer event stops.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from rmq.common.logging import BROKER_LOGGER_NAME
from rmq.dledger.member_state import Role
from rmq.store.config import BrokerRole

log = logging.getLogger(BROKER_LOGGER_NAME)

QUORUM_WAIT_S = 30.0
CATCH_UP_POLL_S = 0.05
CATCH_UP_MAX_S = 60.0


class DLedgerService:
    """The group's endpoint among the broker's services (started after the
    store, stopped before it).  The start waits until the group has a leader:
    a broker that cannot reach a quorum of its peers within
    ``RMQ_DLEDGER_QUORUM_WAIT_S`` seconds (30) fails its start with one line
    rather than run as a member that can never take or serve a message."""

    def __init__(self, server: Any) -> None:
        self.server = server

    async def start(self) -> None:
        await self.server.start()
        wait_s = float(os.environ.get("RMQ_DLEDGER_QUORUM_WAIT_S", QUORUM_WAIT_S))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while self.server.member_state.leader_id is None:
            if loop.time() > deadline:
                config = self.server.config
                raise RuntimeError(
                    f"DLedger group {config.group}: no leader within {wait_s:.0f} s, a quorum "
                    f"of {config.peers} is not reachable from {config.self_id}")
            await asyncio.sleep(0.1)

    async def shutdown(self) -> None:
        await self.server.shutdown()


class DLedgerRoleChangeHandler:
    def __init__(self, controller: Any, commit_log: Any) -> None:
        self.c = controller
        self.commit_log = commit_log
        self.server = commit_log.server
        self.slave_id = int(self.server.config.self_id[1:]) + 1 \
            if self.server.config.self_id[1:].isdigit() else 1
        self._lock = asyncio.Lock()
        self._generation = 0
        self.server.elector.role_handlers.append(self.handle)

    def handle(self, term: int, role: Role) -> None:
        self._generation += 1
        asyncio.get_running_loop().create_task(self._change(self._generation, term, role),
                                               name=f"dledgerRoleChange-{term}")

    async def _change(self, generation: int, term: int, role: Role) -> None:
        async with self._lock:
            if generation != self._generation:
                return  # a newer role event came in meanwhile
            try:
                if role is Role.LEADER:
                    await self._to_master(generation, term)
                elif self.c.store_config.brokerRole is not BrokerRole.SLAVE or \
                        self.c.broker_config.brokerId != self.slave_id:
                    await self._to_slave()
            except Exception:  # noqa: BLE001 - the next role event tries again
                log.exception("dledger role change to %s in term %d failed", role.value, term)

    async def _to_master(self, generation: int, term: int) -> None:
        store, dledger = self.c.message_store, self.commit_log.dledger
        waited = 0.0
        while dledger.committed_index < dledger.ledger_end_index or \
                store.dispatch_behind_bytes() > 0:
            if generation != self._generation or not self.server.member_state.is_leader():
                return
            if waited > CATCH_UP_MAX_S:
                log.warning("leader of term %d still catching up after %.0f s", term, waited)
                waited = 0.0
            await asyncio.sleep(CATCH_UP_POLL_S)
            waited += CATCH_UP_POLL_S
        store.recover_topic_queue_table()
        self.c.store_config.brokerRole = BrokerRole.SYNC_MASTER
        self.c.broker_config.brokerId = 0
        schedule = self.c.schedule_message_service
        if schedule is not None:
            await schedule.shutdown()
            await schedule.start()
        tx = self.c.transactional_message_check_service
        if tx is not None and tx._task is None:
            await tx.start()
        log.info("dledger leader of term %d: master (brokerId 0)", term)
        await self.c.register_broker_all(check_order_config=True, oneway=False, force=True)

    async def _to_slave(self) -> None:
        self.c.store_config.brokerRole = BrokerRole.SLAVE
        self.c.broker_config.brokerId = self.slave_id
        schedule = self.c.schedule_message_service
        if schedule is not None:
            await schedule.shutdown()
        tx = self.c.transactional_message_check_service
        if tx is not None:
            await tx.shutdown()
        log.info("dledger follower: slave (brokerId %d)", self.slave_id)
        await self.c.register_broker_all(check_order_config=False, oneway=False, force=True)
