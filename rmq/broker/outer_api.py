"""BrokerOuterAPI: the broker's requests to name servers (RocketMQ ``BrokerOuterAPI``).

* REGISTER_BROKER to every name server in parallel; plain RegisterBrokerBody
  JSON or the zlib form (compressedRegister), with ``bodyCrc32`` = CRC-32 of
  the body as sent masked to 31 bits; a oneway variant for the registration
  that follows an auto-created topic.
* UNREGISTER_BROKER to every name server at shutdown.
* QUERY_DATA_VERSION to every name server (forceRegister=false): register
  only if some name server has another DataVersion or none.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from dataclasses import dataclass

from rmq.common import fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.data_version import DataVersion
from rmq.common.logging import BROKER_LOGGER_NAME
from rmq.common.protocol.headers_namesrv import (
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
)
from rmq.common.topic_config import RegisterBrokerBody, TopicConfigSerializeWrapper
from rmq.remoting import RemotingClient, RemotingCommand
from rmq.remoting.config import NettyClientConfig
from rmq.remoting.exceptions import RemotingError

log = logging.getLogger(BROKER_LOGGER_NAME)

UNREGISTER_TIMEOUT_MS = 3000


def body_crc32(body: bytes) -> int:
    """``UtilAll.crc32`` as 4.9.8 sends it: CRC-32 masked with 0x7FFFFFFF."""
    return zlib.crc32(body) & 0x7FFFFFFF


@dataclass(slots=True)
class BrokerIdentity:
    cluster_name: str
    broker_addr: str
    broker_name: str
    broker_id: int


@dataclass(slots=True)
class RegisterBrokerResult:
    """What a name server answered (``RegisterBrokerResult``)."""

    namesrv_addr: str
    master_addr: str | None = None
    ha_server_addr: str | None = None
    kv_table: dict[str, str] | None = None


class NamesrvError(Exception):
    """A name server answered with a failure code."""

    def __init__(self, addr: str, code: int, remark: str | None) -> None:
        super().__init__(f"name server {addr} answered code {code}: {remark}")
        self.code = code


def _kv_table(body: bytes | None) -> dict[str, str] | None:
    if not body:
        return None
    obj = fastjson.loads(bytes(body))
    table = obj.get("table") if isinstance(obj, dict) else None
    return {str(k): str(v) for k, v in table.items()} if isinstance(table, dict) else None


class BrokerOuterAPI:
    def __init__(self, config: NettyClientConfig) -> None:
        self.client = RemotingClient(config)
        self._addrs: list[str] = []

    def update_name_server_address_list(self, addrs: str | None) -> None:
        new = [a.strip() for a in (addrs or "").split(";") if a.strip()]
        if new != self._addrs:
            log.info("name server address changed, old: %s, new: %s", self._addrs, new)
            self._addrs = new
            self.client.update_namesrv_address_list(new)

    @property
    def name_server_addresses(self) -> list[str]:
        return list(self._addrs)

    async def close(self) -> None:
        await self.client.close()

    # ---- registration ---------------------------------------------------------
    def _register_request(self, who: BrokerIdentity, ha_server_addr: str,
                          wrapper: TopicConfigSerializeWrapper, filter_servers: list[str],
                          compressed: bool) -> tuple[RegisterBrokerRequestHeader, bytes]:
        body = RegisterBrokerBody(wrapper, list(filter_servers)).encode(compress=compressed)
        header = RegisterBrokerRequestHeader(
            brokerName=who.broker_name, brokerAddr=who.broker_addr,
            clusterName=who.cluster_name, haServerAddr=ha_server_addr,
            brokerId=who.broker_id, compressed=compressed, bodyCrc32=body_crc32(body))
        return header, body

    async def register_broker_all(self, who: BrokerIdentity, ha_server_addr: str,
                                  wrapper: TopicConfigSerializeWrapper,
                                  filter_servers: list[str], oneway: bool, timeout_ms: int,
                                  compressed: bool) -> list[RegisterBrokerResult]:
        """Register with every name server at once; failures are logged, the
        results of those that answered are returned (in address order)."""
        header, body = self._register_request(who, ha_server_addr, wrapper, filter_servers,
                                              compressed)
        addrs = list(self._addrs)
        outcomes = await asyncio.gather(
            *(self._register_one(a, header, body, oneway, timeout_ms) for a in addrs),
            return_exceptions=True)
        results: list[RegisterBrokerResult] = []
        for addr, outcome in zip(addrs, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                log.warning("register broker to name server %s failed: %s", addr, outcome)
            elif outcome is not None:
                log.info("register broker[%d]to name server %s OK", who.broker_id, addr)
                results.append(outcome)
        return results

    async def _register_one(self, addr: str, header: RegisterBrokerRequestHeader, body: bytes,
                            oneway: bool, timeout_ms: int) -> RegisterBrokerResult | None:
        request = RemotingCommand.create_request(RequestCode.REGISTER_BROKER, header, body)
        if oneway:
            await self.client.invoke_oneway(addr, request, timeout_ms)
            return None
        response = await self.client.invoke(addr, request, timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            raise NamesrvError(addr, response.code, response.remark)
        rh = response.decode_header(RegisterBrokerResponseHeader)
        return RegisterBrokerResult(addr, rh.masterAddr, rh.haServerAddr,
                                    _kv_table(response.body))

    async def unregister_broker_all(self, who: BrokerIdentity) -> None:
        header = UnRegisterBrokerRequestHeader(
            brokerName=who.broker_name, brokerAddr=who.broker_addr,
            clusterName=who.cluster_name, brokerId=who.broker_id)

        async def one(addr: str) -> None:
            request = RemotingCommand.create_request(RequestCode.UNREGISTER_BROKER, header)
            try:
                response = await self.client.invoke(addr, request, UNREGISTER_TIMEOUT_MS)
                if response.code != ResponseCode.SUCCESS:
                    raise NamesrvError(addr, response.code, response.remark)
                log.info("unregisterBroker OK, NamesrvAddr: %s", addr)
            except (RemotingError, NamesrvError) as exc:
                log.warning("unregisterBroker Exception, %s: %s", addr, exc)

        await asyncio.gather(*(one(a) for a in self._addrs))

    async def need_register(self, who: BrokerIdentity, data_version: DataVersion,
                            timeout_ms: int) -> bool:
        """QUERY_DATA_VERSION to every name server: True when any of them
        reports a change or holds another DataVersion (or cannot be asked)."""
        header = QueryDataVersionRequestHeader(
            brokerName=who.broker_name, brokerAddr=who.broker_addr,
            clusterName=who.cluster_name, brokerId=who.broker_id)
        body = data_version.encode()

        async def one(addr: str) -> bool:
            request = RemotingCommand.create_request(RequestCode.QUERY_DATA_VERSION, header, body)
            try:
                response = await self.client.invoke(addr, request, timeout_ms)
            except RemotingError as exc:
                log.warning("Query data version from name server %s Exception, %s", addr, exc)
                return True
            if response.code != ResponseCode.SUCCESS:
                return True
            changed = response.decode_header(QueryDataVersionResponseHeader).changed
            theirs = DataVersion.decode(response.body) if response.body else None
            return bool(changed) or theirs is None or theirs != data_version

        answers = await asyncio.gather(*(one(a) for a in self._addrs))
        return any(answers)
