"""Client settings (``ClientConfig``, ``DefaultMQProducer`` and
``DefaultMQPushConsumer`` fields), with RocketMQ 4.9.8 defaults.  Attribute
names are the Java property names in snake_case."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field

from rmq.acl.signer import SessionCredentials
from rmq.client.heartbeat import ConsumeFromWhere, MessageModel
from rmq.common.topics import AUTO_CREATE_TOPIC_KEY_TOPIC


def local_ip() -> str:
    """The first non-loopback IPv4 address (``RemotingUtil.getLocalAddress``),
    found without sending anything; 127.0.0.1 when the host has none."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            ip = s.getsockname()[0]
            if ip and not ip.startswith("0."):
                return ip
    except OSError:
        pass
    return "127.0.0.1"


def _default_namesrv() -> str:
    return os.environ.get("NAMESRV_ADDR", "")


@dataclass(slots=True)
class ClientConfig:
    namesrv_addr: str = field(default_factory=_default_namesrv)  # "host:port;host:port"
    client_ip: str = field(default_factory=local_ip)
    instance_name: str = "DEFAULT"
    unit_name: str | None = None
    poll_name_server_interval: int = 30000
    heartbeat_broker_interval: int = 30000
    persist_consumer_offset_interval: int = 5000
    mq_client_api_timeout: int = 3000
    # plain ACL: with both keys every request is signed (Java: AclClientRPCHook)
    access_key: str | None = None
    secret_key: str | None = None
    security_token: str | None = None

    def credentials(self) -> SessionCredentials | None:
        """The session credentials to sign with, or None (not signing)."""
        if not self.access_key or self.secret_key is None:
            return None
        return SessionCredentials(self.access_key, self.secret_key, self.security_token)

    def namesrv_list(self) -> list[str]:
        return [a.strip() for a in self.namesrv_addr.replace(",", ";").split(";") if a.strip()]

    def build_client_id(self) -> str:
        """``ip@instanceName[@unitName]``; "DEFAULT" becomes ``pid#nanotime`` so two
        clients in one process have different ids, as in Java."""
        if self.instance_name == "DEFAULT":
            self.instance_name = f"{os.getpid()}#{time.monotonic_ns()}"
        cid = f"{self.client_ip}@{self.instance_name}"
        if self.unit_name:
            cid += f"@{self.unit_name}"
        return cid


@dataclass(slots=True)
class ProducerConfig:
    producer_group: str = "DEFAULT_PRODUCER"
    create_topic_key: str = AUTO_CREATE_TOPIC_KEY_TOPIC
    default_topic_queue_nums: int = 4
    send_msg_timeout: int = 3000
    compress_msg_body_over_howmuch: int = 4096
    compress_level: int = 5
    retry_times_when_send_failed: int = 2
    retry_times_when_send_async_failed: int = 2
    retry_another_broker_when_not_store_ok: bool = False
    max_message_size: int = 4 * 1024 * 1024
    send_latency_fault_enable: bool = True
    enable_msg_trace: bool = False  # Pub / EndTransaction trace records (docs/client.md)
    customized_trace_topic: str | None = None  # default RMQ_SYS_TRACE_TOPIC


@dataclass(slots=True)
class ConsumerConfig:
    consumer_group: str = "DEFAULT_CONSUMER"
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consume_timestamp: int = 0  # ms; default = now - 30 min, as Java
    consume_concurrently_max: int = 20  # consumeThreadMax: messages in the listener at once
    consume_message_batch_max_size: int = 1
    pull_batch_size: int = 32
    pull_interval: int = 0
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue: int = 100  # MiB
    max_reconsume_times: int = -1  # -1 = broker decides (16)
    suspend_current_queue_time_millis: int = 1000
    broker_suspend_max_time_millis: int = 15000
    consumer_timeout_millis_when_suspend: int = 30000
    post_subscription_when_pull: bool = False
    rebalance_interval: int = 20000
    lock_interval: int = 20000
    offset_store_dir: str | None = None  # broadcasting; default ~/.rocketmq_offsets
    consume_timeout: int = 15  # minutes; a longer listener call is traced as TIME_OUT
    enable_msg_trace: bool = False  # SubBefore / SubAfter trace records
    customized_trace_topic: str | None = None
