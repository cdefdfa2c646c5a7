"""SlaveSynchronize: a slave copies its master's metadata (PROTOCOL.md 7.6).

Every 10 s (first run 3 s after start), and at once when a registration
answer names a new master, a slave whose name-server registration reported a
master address other than its own asks that master, 3 s timeout each, no
header, no body:

1. GET_ALL_TOPIC_CONFIG on the master's fast (VIP) port: when the data version
   differs, the whole topic table and the data version are replaced;
2. GET_ALL_CONSUMER_OFFSET: merged into the offset table (per topic@group);
3. GET_ALL_DELAY_OFFSET: the body is written verbatim as delayOffset.json;
4. GET_ALL_SUBSCRIPTIONGROUP_CONFIG: when the data version differs, the group
   table and the data version are replaced.

Each step is independent: a failure is logged and the next one still runs.
The commit log itself is replicated by HA, not here.
"""

from __future__ import annotations

import logging
from typing import Any

from rmq.broker.consumer_offset_manager import offset_table_from_json
from rmq.broker.subscription_group_manager import SubscriptionGroupConfig
from rmq.common import fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.config_manager import write_file_safely
from rmq.common.data_version import DataVersion
from rmq.common.logging import BROKER_LOGGER_NAME
from rmq.common.topic_config import TopicConfigSerializeWrapper
from rmq.remoting import RemotingCommand
from rmq.store.schedule import delay_offset_path

log = logging.getLogger(BROKER_LOGGER_NAME)

R = RequestCode
TIMEOUT_MS = 3000
FIRST_RUN_S = 3.0
PERIOD_S = 10.0


def vip_address(addr: str) -> str:
    """``MixAll.brokerVIPChannel``: the same host, port - 2."""
    host, _, port = addr.rpartition(":")
    return f"{host}:{int(port) - 2}"


def _same(a: DataVersion, b: DataVersion) -> bool:
    return a.timestamp == b.timestamp and a.counter == b.counter


class SlaveSynchronize:
    def __init__(self, controller) -> None:
        self.c = controller

    @property
    def master_addr(self) -> str | None:
        return self.c.master_addr

    async def _fetch(self, addr: str, code: int) -> bytes:
        response = await self.c.outer_api.client.invoke(
            addr, RemotingCommand.create_request(code), TIMEOUT_MS)
        if response.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"code {response.code}: {response.remark}")
        return bytes(response.body or b"")

    async def sync_all(self) -> None:
        master = self.master_addr
        if not master or master == self.c.broker_addr() or not self.c.is_slave():
            return  # no master known, or this broker became one (DLedger)
        for step in (self.sync_topic_config, self.sync_consumer_offset,
                     self.sync_delay_offset, self.sync_subscription_group_config):
            try:
                await step(master)
            except Exception as exc:  # the master may be restarting: next round
                log.error("SlaveSynchronize %s from %s failed: %s", step.__name__, master, exc)

    async def sync_topic_config(self, master: str) -> None:
        body = await self._fetch(vip_address(master), R.GET_ALL_TOPIC_CONFIG)
        wrapper = TopicConfigSerializeWrapper.from_json_obj(fastjson.loads(body))
        manager = self.c.topic_config_manager
        if _same(manager.data_version, wrapper.dataVersion):
            return
        manager.data_version.assign_new_one(wrapper.dataVersion)
        manager.table.clear()
        manager.table.update(wrapper.topicConfigTable)
        manager.persist()
        log.info("Update slave topic config from master, %s", master)

    async def sync_consumer_offset(self, master: str) -> None:
        body = await self._fetch(master, R.GET_ALL_CONSUMER_OFFSET)
        table = offset_table_from_json(fastjson.loads(body).get("offsetTable"))
        manager = self.c.consumer_offset_manager
        manager.offset_table.update(table)
        manager.persist()
        log.info("Update slave consumer offset from master, %s", master)

    async def sync_delay_offset(self, master: str) -> None:
        body = await self._fetch(master, R.GET_ALL_DELAY_OFFSET)
        write_file_safely(body.decode("utf-8"),
                          delay_offset_path(self.c.store_config.storePathRootDir))
        log.info("Update slave delay offset from master, %s", master)

    async def sync_subscription_group_config(self, master: str) -> None:
        body = await self._fetch(master, R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        obj: Any = fastjson.loads(body)
        dv = DataVersion.from_json_obj(obj.get("dataVersion"))
        manager = self.c.subscription_group_manager
        if _same(manager.data_version, dv):
            return
        table = {name: SubscriptionGroupConfig.from_json_obj(cfg, name)
                 for name, cfg in (obj.get("subscriptionGroupTable") or {}).items()}
        manager.data_version.assign_new_one(dv)
        manager.table.clear()
        manager.table.update(table)
        manager.persist()
        log.info("Update slave Subscription Group from master, %s", master)
