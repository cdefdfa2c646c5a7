"""DefaultRequestProcessor: every request code the name server answers.

Mirrors ``DefaultRequestProcessor`` of 4.9.8 (../shared/spec/PROTOCOL.md 3.1).
One difference on purpose: Java answers nothing to a code it does not know
(the caller times out); rmq answers REQUEST_CODE_NOT_SUPPORTED at once.
Handlers are synchronous: each runs to completion on the event loop, which is
what keeps the route tables consistent (see ``route_info``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from rmq.common.codes import VERSION_V3_0_11, VERSION_V4_9_4, RequestCode, ResponseCode
from rmq.common.data_version import DataVersion
from rmq.common.fastjson import FastjsonError
from rmq.common.logging import NAMESRV_LOGGER_NAME
from rmq.common.properties import parse_properties
from rmq.common.protocol import headers_namesrv as h
from rmq.common.route import TopicList
from rmq.common.top_addressing import fetch_ns_addr, ws_addr
from rmq.common.topic_config import (
    RegisterBodyError,
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
)
from rmq.namesrv.kv_config import NAMESPACE_ORDER_TOPIC_CONFIG
from rmq.remoting import Channel, RemotingClient, RemotingCommand
from rmq.remoting.exceptions import RemotingError
from rmq.remoting.handler_table import Handler, HandlerTableProcessor

if TYPE_CHECKING:
    from rmq.namesrv.controller import NamesrvController

log = logging.getLogger(NAMESRV_LOGGER_NAME)

FAQ_APPLY_TOPIC = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."



def _ok(header=None, body=None) -> RemotingCommand:
    return RemotingCommand.create_response(ResponseCode.SUCCESS, None, header, body)


def _error(code: int, remark: str) -> RemotingCommand:
    return RemotingCommand.create_response(code, remark)


def _topic_list(topics: TopicList) -> RemotingCommand:
    return _ok(body=topics.encode())


def _bad_broker_id(hdr) -> RemotingCommand | None:
    """Java unboxes ``brokerId`` into a long: a value that did not parse fails the
    request (SYSTEM_ERROR) instead of entering the tables as no id at all."""
    if hdr.brokerId is None:
        return _error(ResponseCode.SYSTEM_ERROR, "the custom field brokerId is not a number")
    return None


def body_crc32(body) -> int:
    """``UtilAll.crc32``: CRC-32 of the body masked to a non-negative int."""
    return zlib.crc32(body or b"") & 0x7FFFFFFF


def _no_route(topic: str) -> RemotingCommand:
    return _error(ResponseCode.TOPIC_NOT_EXIST,
                  f"No topic route info in name server for the topic: {topic}" + FAQ_APPLY_TOPIC)


class DefaultRequestProcessor(HandlerTableProcessor):
    def __init__(self, controller: NamesrvController) -> None:
        self._product_env_client: RemotingClient | None = None
        self.controller = controller
        self.route = controller.route_info_manager
        self.kv = controller.kv_config_manager
        self.handlers: dict[int, Handler] = {
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER:
                lambda c, r: _topic_list(self.route.get_all_topic_list()),
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic_in_namesrv,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kv_list_by_namespace,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS:
                lambda c, r: _topic_list(self.route.get_system_topic_list()),
            RequestCode.GET_UNIT_TOPIC_LIST:
                lambda c, r: _topic_list(self.route.get_unit_topics()),
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST:
                lambda c, r: _topic_list(self.route.get_has_unit_sub_topic_list()),
            RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST:
                lambda c, r: _topic_list(self.route.get_has_unit_sub_ununit_topic_list()),
            RequestCode.UPDATE_NAMESRV_CONFIG: self.update_config,
            RequestCode.GET_NAMESRV_CONFIG: self.get_config,
        }

    def reject_request(self) -> bool:
        return False

    # ------------------------------------------------------------------ KV

    def put_kv_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        hdr = request.decode_header(h.PutKVConfigRequestHeader)
        self.kv.put_kv_config(hdr.namespace, hdr.key, hdr.value)
        return _ok()

    def get_kv_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        hdr = request.decode_header(h.GetKVConfigRequestHeader)
        value = self.kv.get_kv_config(hdr.namespace, hdr.key)
        if value is None:
            return _error(ResponseCode.QUERY_NOT_FOUND,
                          f"No config item, Namespace: {hdr.namespace} Key: {hdr.key}")
        return _ok(h.GetKVConfigResponseHeader(value))

    def delete_kv_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        hdr = request.decode_header(h.DeleteKVConfigRequestHeader)
        self.kv.delete_kv_config(hdr.namespace, hdr.key)
        return _ok()

    def get_kv_list_by_namespace(self, channel: Channel,
                                 request: RemotingCommand) -> RemotingCommand:
        hdr = request.decode_header(h.GetKVListByNamespaceRequestHeader)
        body = self.kv.get_kv_list_by_namespace(hdr.namespace)
        if body is None:
            return _error(ResponseCode.QUERY_NOT_FOUND,
                          f"No config item, Namespace: {hdr.namespace}")
        return _ok(body=body)

    # ------------------------------------------------------------- brokers

    def register_broker(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        hdr = request.decode_header(h.RegisterBrokerRequestHeader)
        bad = _bad_broker_id(hdr)
        if bad is not None:
            return bad
        body = request.body
        if hdr.bodyCrc32 != 0 and body_crc32(body) != hdr.bodyCrc32:
            log.warning("receive registerBroker request,crc32 not match,from %s",
                        channel.remote_addr)
            return _error(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        filter_servers: list[str] | None
        try:
            if request.version >= VERSION_V3_0_11:
                if body:
                    decoded = RegisterBrokerBody.decode(body, hdr.compressed)
                else:
                    decoded = RegisterBrokerBody()
                    decoded.topicConfigSerializeWrapper.dataVersion = DataVersion(0, 0)
                wrapper = decoded.topicConfigSerializeWrapper
                filter_servers = decoded.filterServerList
            else:
                wrapper = (TopicConfigSerializeWrapper.decode(body) if body else
                           TopicConfigSerializeWrapper(dataVersion=DataVersion(0, 0)))
                filter_servers = None
        except RegisterBodyError as exc:
            log.warning("bad REGISTER_BROKER body from %s: %s", channel.remote_addr, exc)
            return _error(ResponseCode.SYSTEM_ERROR, f"Failed to decode RegisterBrokerBody: {exc}")
        result = self.route.register_broker(hdr.clusterName, hdr.brokerAddr, hdr.brokerName,
                                            hdr.brokerId, hdr.haServerAddr, wrapper,
                                            filter_servers, channel)
        return _ok(h.RegisterBrokerResponseHeader(result.haServerAddr, result.masterAddr),
                   self.kv.get_kv_list_by_namespace(NAMESPACE_ORDER_TOPIC_CONFIG))

    def unregister_broker(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        hdr = request.decode_header(h.UnRegisterBrokerRequestHeader)
        bad = _bad_broker_id(hdr)
        if bad is not None:
            return bad
        self.route.unregister_broker(hdr.clusterName, hdr.brokerAddr, hdr.brokerName,
                                     hdr.brokerId)
        return _ok()

    def query_data_version(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        hdr = request.decode_header(h.QueryDataVersionRequestHeader)
        try:
            data_version = DataVersion.decode(request.body or b"")
        except (ValueError, FastjsonError) as exc:
            return _error(ResponseCode.SYSTEM_ERROR, f"bad DataVersion body: {exc}")
        changed = self.route.is_broker_topic_config_changed(hdr.brokerAddr, data_version)
        if not changed:
            self.route.update_broker_info_update_timestamp(hdr.brokerAddr, self.route.clock())
        stored = self.route.query_broker_topic_config(hdr.brokerAddr)
        return _ok(h.QueryDataVersionResponseHeader(changed),
                   stored.encode() if stored is not None else None)

    # -------------------------------------------------------------- routes

    def get_route_info_by_topic(self, channel: Channel,
                                request: RemotingCommand) -> RemotingCommand:
        hdr = request.decode_header(h.GetRouteInfoRequestHeader)
        order_conf = None
        if self.controller.namesrv_config.orderMessageEnable:
            order_conf = self.kv.get_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, hdr.topic)
        standard = request.version >= VERSION_V4_9_4 or bool(hdr.acceptStandardJsonOnly)
        body = self.route.encoded_topic_route(hdr.topic, standard, order_conf)
        if body is None:
            if self.controller.namesrv_config.clusterTest:
                return self._route_from_product_env(hdr.topic, request.version)
            return _no_route(hdr.topic)
        return _ok(body=body)

    async def _route_from_product_env(self, topic: str, version: int) -> RemotingCommand:
        """clusterTest (4.9.8's ClusterTestRequestProcessor): a topic this name
        server does not route is looked up in the product environment's name
        servers (NAMESRV_ADDR, else the address server's list for the unit
        ``productEnvName``)."""
        env = self.controller.namesrv_config.productEnvName
        addrs = os.environ.get("NAMESRV_ADDR") or await asyncio.to_thread(
            fetch_ns_addr, ws_addr(unit=env))
        for addr in [a.strip() for a in (addrs or "").split(";") if a.strip()]:
            request = RemotingCommand.create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            request.version = version
            try:
                answer = await self.product_env_client().invoke(addr, request, 3000)
            except RemotingError as e:
                log.info("get route info by topic from product environment failed. envName=%s, %s", env, e)
                continue
            if answer.code == ResponseCode.SUCCESS and answer.body:
                return _ok(body=bytes(answer.body))
        return _no_route(topic)

    async def close(self) -> None:
        if self._product_env_client is not None:
            await self._product_env_client.close()
            self._product_env_client = None

    def product_env_client(self) -> RemotingClient:
        if self._product_env_client is None:
            self._product_env_client = RemotingClient()
        return self._product_env_client

    def get_broker_cluster_info(self, channel: Channel,
                                request: RemotingCommand) -> RemotingCommand:
        return _ok(body=self.route.get_all_cluster_info().encode())

    def wipe_write_perm_of_broker(self, channel: Channel,
                                  request: RemotingCommand) -> RemotingCommand:
        return self._change_write_perm(channel, request, "wipe", h.WipeWritePermOfBrokerRequestHeader,
                                       self.route.wipe_write_perm_of_broker,
                                       h.WipeWritePermOfBrokerResponseHeader)

    def add_write_perm_of_broker(self, channel: Channel,
                                 request: RemotingCommand) -> RemotingCommand:
        return self._change_write_perm(channel, request, "add", h.AddWritePermOfBrokerRequestHeader,
                                       self.route.add_write_perm_of_broker,
                                       h.AddWritePermOfBrokerResponseHeader)

    @staticmethod
    def _change_write_perm(channel: Channel, request: RemotingCommand, verb: str, request_header: type,
                           change: Callable[[str], int], response_header: type) -> RemotingCommand:
        """Wipe or add the write permission of a broker's queues; answers how
        many topics changed."""
        hdr = request.decode_header(request_header)
        count = change(hdr.brokerName)
        log.info("%s write perm of broker[%s], client: %s, %d", verb, hdr.brokerName,
                 channel.remote_addr, count)
        return _ok(response_header(count))

    def delete_topic_in_namesrv(self, channel: Channel,
                                request: RemotingCommand) -> RemotingCommand:
        hdr = request.decode_header(h.DeleteTopicFromNamesrvRequestHeader)
        self.route.delete_topic(hdr.topic, hdr.clusterName)
        return _ok()

    def get_topics_by_cluster(self, channel: Channel,
                              request: RemotingCommand) -> RemotingCommand:
        hdr = request.decode_header(h.GetTopicsByClusterRequestHeader)
        return _topic_list(self.route.get_topics_by_cluster(hdr.cluster))

    # -------------------------------------------------------------- config

    def update_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        log.info("updateConfig called by %s", channel.remote_addr)
        if not request.body:
            return _ok()
        try:
            props = parse_properties(bytes(request.body).decode("utf-8"))
        except UnicodeDecodeError:
            return _error(ResponseCode.SYSTEM_ERROR, "string2Properties error: body is not UTF-8")
        black = self.controller.namesrv_config.black_list()
        if any(key in black for key in props):
            return _error(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        invalid = self.controller.configuration.update(props)
        if invalid:
            return _error(ResponseCode.SYSTEM_ERROR,
                          "string2Properties error: bad value for " + ", ".join(invalid))
        return _ok()

    def get_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return _ok(body=self.controller.configuration.format().encode("utf-8"))
