"""The 5.x clients the endpoint knows, keyed by ``x-mq-client-id``: their
Settings (the Telemetry handshake), the channel the broker sees them on, and
their Telemetry stream (where the broker's requests to them go).

The Settings answer is the client's own merged with the server side as 5.3.3
merges it (``GrpcClientSettingsManager``): for a producer the backoff policy,
``validate_message_type`` and ``max_body_size`` (without that echo a Python
producer fails every send client-side); for a consumer the batch size, long
polling timeout, ``fifo`` from the group's ``consumeMessageOrderly`` and the
retry policy.  A client is registered with the broker's producer and consumer
managers through HEART_BEAT on its ``LocalChannel`` (producer group = topic
name, as 5.3.3 does), so it shows in ``consumerConnection`` and transaction
checks reach it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.duration_pb2 import Duration

from rmq.client.heartbeat import (
    EXPRESSION_TAG,
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    build_subscription,
)
from rmq.common.codes import LanguageCode, RequestCode
from rmq.common.protocol.headers_broker import CheckTransactionStateRequestHeader
from rmq.proxy.local import LocalChannel, LocalInvoker
from rmq.proxy.messages import to_proto_message
from rmq.proxy.status import Code, ProxyError, check_response, status
from rmq.proxy.v2 import definition_pb2 as pb
from rmq.proxy.v2 import service_pb2 as spb
from rmq.remoting.command import RemotingCommand

log = logging.getLogger("rmq.proxy")

# ProxyConfig defaults of 5.3.3
PRODUCER_MAX_ATTEMPTS = 3
PRODUCER_BACKOFF_INITIAL_MS = 10
PRODUCER_BACKOFF_MAX_MS = 1000
PRODUCER_BACKOFF_MULTIPLIER = 2.0
CONSUMER_BATCH_SIZE = 32
CONSUMER_LONG_POLLING_MS = 20_000
TRANSACTION_DATA_EXPIRE_S = 30.0
SETTINGS_WAIT_S = 3.0
CLIENT_IDLE_S = 120.0  # ClientHousekeepingService's channel expiry


def _duration(ms: int) -> Duration:
    return Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


@dataclass(slots=True)
class TransactionData:
    """What EndTransaction needs of a half message (5.3.3's ``TransactionData``)."""

    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    expires: float


@dataclass(slots=True)
class ClientSession:
    client_id: str
    channel: LocalChannel
    language: int = LanguageCode.OTHER
    version: int = 0
    settings: pb.Settings | None = None
    outbox: asyncio.Queue | None = None  # the Telemetry stream's commands, while open
    producer_groups: list[str] = field(default_factory=list)
    consumer_group: str | None = None
    # settings rebuilt from the client's receives, not sent by it (see assume_consumer)
    assumed: bool = False
    # set once the first Settings arrived (a client's first call may race them)
    ready: asyncio.Event = field(default_factory=asyncio.Event)


class ClientRegistry:
    def __init__(self, controller: Any, invoker: LocalInvoker, local_addr: str) -> None:
        self.c = controller
        self.invoker = invoker
        self.local_addr = local_addr
        self.sessions: dict[str, ClientSession] = {}
        # (producer group, transaction id) -> TransactionData
        self.transactions: dict[tuple[str, str], TransactionData] = {}

    # ---- sessions -------------------------------------------------------------
    def session(self, client_id: str, remote_addr: str, language: int = LanguageCode.OTHER
                ) -> ClientSession:
        s = self.sessions.get(client_id)
        if s is None:
            channel = LocalChannel(remote_addr, self.local_addr)
            s = ClientSession(client_id, channel, language)
            channel.on_request = lambda cmd, s=s: self._from_broker(s, cmd)
            self.sessions[client_id] = s
        s.channel.last_active = time.monotonic()
        return s

    async def wait_settings(self, s: ClientSession, timeout_s: float = SETTINGS_WAIT_S) -> None:
        """Give a client's Settings a moment to arrive: a SimpleConsumer receives
        right after opening its Telemetry stream, without waiting for the answer
        (5.3.3 fails such a call with INTERNAL_SERVER_ERROR)."""
        if s.settings is None:
            try:
                await asyncio.wait_for(s.ready.wait(), timeout_s)
            except TimeoutError:
                pass

    def sweep(self, idle_s: float = CLIENT_IDLE_S) -> list[str]:
        """Forget the clients silent for ``idle_s`` with no Telemetry stream open
        (gone without NotifyClientTermination); the broker's housekeeping
        drops their registrations the same way.  Returns their ids."""
        now = time.monotonic()
        gone = [s for s in self.sessions.values()
                if s.outbox is None and now - s.channel.last_active > idle_s]
        for s in gone:
            self.drop(s)
        return [s.client_id for s in gone]

    def settings_of(self, client_id: str) -> pb.Settings | None:
        s = self.sessions.get(client_id)
        return None if s is None else s.settings

    # ---- Settings ----------------------------------------------------------------
    def merged(self, settings: pb.Settings) -> pb.Settings:
        out = pb.Settings()
        out.CopyFrom(settings)
        if settings.HasField("publishing"):
            out.backoff_policy.max_attempts = PRODUCER_MAX_ATTEMPTS
            out.backoff_policy.exponential_backoff.CopyFrom(pb.ExponentialBackoff(
                initial=_duration(PRODUCER_BACKOFF_INITIAL_MS),
                max=_duration(PRODUCER_BACKOFF_MAX_MS), multiplier=PRODUCER_BACKOFF_MULTIPLIER))
            out.publishing.validate_message_type = self.c.broker_config.enableTopicMessageTypeCheck
            out.publishing.max_body_size = self.c.store_config.maxMessageSize
        elif settings.HasField("subscription"):
            group = self.c.subscription_group_manager.find_subscription_group_config(
                settings.subscription.group.name)
            sub = out.subscription
            sub.receive_batch_size = CONSUMER_BATCH_SIZE
            sub.long_polling_timeout.CopyFrom(_duration(CONSUMER_LONG_POLLING_MS))
            sub.fifo = bool(getattr(group, "consumeMessageOrderly", False))
            out.backoff_policy.max_attempts = (group.retryMaxTimes if group else 16) + 1
            levels = self.c.store_config.delay_level_table()
            out.backoff_policy.customized_backoff.CopyFrom(pb.CustomizedBackoff(
                next=[_duration(levels[k]) for k in sorted(levels)]))
        return out

    async def apply_settings(self, s: ClientSession, settings: pb.Settings) -> pb.Settings:
        """Keep the client's settings, register it with the broker, and return
        the merged settings to answer with."""
        if not settings.HasField("publishing") and not settings.HasField("subscription"):
            raise ProxyError(Code.UNRECOGNIZED_CLIENT_TYPE, "settings has neither publishing "
                             "nor subscription")
        s.settings = settings
        s.assumed = False
        s.ready.set()
        if settings.HasField("publishing"):
            s.producer_groups = [t.name for t in settings.publishing.topics]
        else:
            s.consumer_group = settings.subscription.group.name
        await self.heartbeat(s)
        return self.merged(settings)

    async def assume_consumer(self, s: ClientSession, group: str, topic: str,
                              expression: pb.FilterExpression, push: bool) -> None:
        """Consumer settings rebuilt from a receive, for a client the endpoint
        has no Settings of: one the broker met before it restarted.  The
        5.1.2 Python client resends its Settings only every 300 s and reopens
        its Telemetry stream only then, so until that moment 5.3.3 fails each
        of its receives with INTERNAL_SERVER_ERROR; here the receive names the
        group, topic and filter, the group's config gives the rest, and the
        client is registered again under its group (``consumerConnection``).
        Its own Settings replace these when they come."""
        settings = s.settings
        if settings is None:
            settings = pb.Settings(
                client_type=pb.PUSH_CONSUMER if push else pb.SIMPLE_CONSUMER,
                subscription=pb.Subscription(group=pb.Resource(name=group)))
        elif not s.assumed or any(e.topic.name == topic
                                  for e in settings.subscription.subscriptions):
            return
        settings.subscription.subscriptions.append(pb.SubscriptionEntry(
            topic=pb.Resource(name=topic), expression=expression))
        s.settings = settings
        s.assumed = True
        s.consumer_group = group
        s.ready.set()
        await self.heartbeat(s)
        log.info("gRPC client %s: settings assumed from its receive (group %s, topic %s)",
                 s.client_id, group, topic)

    # ---- broker registration -------------------------------------------------------
    def _consumer_data(self, settings: pb.Settings) -> ConsumerData:
        sub = settings.subscription
        push = settings.client_type == pb.PUSH_CONSUMER
        subs = []
        for entry in sub.subscriptions:
            kind = "SQL92" if entry.expression.type == pb.SQL else EXPRESSION_TAG
            try:
                subs.append(build_subscription(entry.topic.name, entry.expression.expression or "*",
                                               kind))
            except ValueError as exc:
                raise ProxyError(Code.ILLEGAL_FILTER_EXPRESSION, str(exc)) from None
        return ConsumerData(sub.group.name,
                            ConsumeType.CONSUME_PASSIVELY if push else ConsumeType.CONSUME_ACTIVELY,
                            MessageModel.CLUSTERING, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, subs)

    async def heartbeat(self, s: ClientSession) -> None:
        """HEART_BEAT for the client's groups, on its channel."""
        settings = s.settings
        if settings is None:
            raise ProxyError(Code.UNRECOGNIZED_CLIENT_TYPE,
                             "the client's settings are unknown: open the Telemetry stream first")
        data = HeartbeatData(s.client_id)
        if settings.HasField("publishing"):
            data.producer_groups = list(s.producer_groups)
        else:
            data.consumers = [self._consumer_data(settings)]
        response = await self.invoker.invoke(s.channel, RequestCode.HEART_BEAT, {}, data.encode(),
                                             language=s.language)
        check_response(response, "heartbeat")

    async def terminate(self, s: ClientSession) -> None:
        """UNREGISTER_CLIENT for the client's groups; forget it."""
        if s.settings is None:
            raise ProxyError(Code.UNRECOGNIZED_CLIENT_TYPE, "the client's settings are unknown")
        groups = [("producerGroup", g) for g in s.producer_groups]
        if s.consumer_group:
            groups.append(("consumerGroup", s.consumer_group))
        for key, group in groups:
            await self.invoker.invoke(s.channel, RequestCode.UNREGISTER_CLIENT,
                                      {"clientID": s.client_id, key: group})
        self.drop(s)

    def drop(self, s: ClientSession) -> None:
        self.sessions.pop(s.client_id, None)
        s.settings = None
        s.channel.close()
        if s.outbox is not None:
            s.outbox.put_nowait(None)

    def close(self) -> None:
        for s in list(self.sessions.values()):
            self.drop(s)

    # ---- transactions ----------------------------------------------------------------
    def remember_transaction(self, group: str, transaction_id: str, queue_offset: int,
                             commit_log_offset: int) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        expired = [k for k, v in self.transactions.items() if v.expires <= now]
        for key in expired:
            del self.transactions[key]
        self.transactions[(group, transaction_id)] = TransactionData(
            group, queue_offset, commit_log_offset, now + TRANSACTION_DATA_EXPIRE_S)

    def take_transaction(self, group: str, transaction_id: str) -> TransactionData:
        data = self.transactions.pop((group, transaction_id), None)
        if data is None or data.expires <= asyncio.get_running_loop().time():
            raise ProxyError(Code.INVALID_TRANSACTION_ID,
                             f"cannot find transaction data, transaction id {transaction_id} "
                             f"(expired or unknown)")
        return data

    def _from_broker(self, s: ClientSession, cmd: RemotingCommand) -> None:
        """A request of the broker to the client: a transaction check becomes a
        RecoverOrphanedTransactionCommand on the Telemetry stream; the
        others (consumer ids changed) need nothing from a 5.x client."""
        if cmd.code != RequestCode.CHECK_TRANSACTION_STATE:
            return
        if s.outbox is None:
            log.warning("transaction check for %s dropped: no Telemetry stream", s.client_id)
            return
        from rmq.store.message_codec import decode_message

        header = cmd.decode_header(CheckTransactionStateRequestHeader)
        msg = decode_message(cmd.body)
        group = msg.properties.get("PGROUP", msg.topic)
        tid = header.transactionId or header.msgId or ""
        self.remember_transaction(group, tid, header.tranStateTableOffset, header.commitLogOffset)
        command = spb.TelemetryCommand(
            status=status(Code.OK),
            recover_orphaned_transaction_command=spb.RecoverOrphanedTransactionCommand(
                message=to_proto_message(msg), transaction_id=tid))
        s.outbox.put_nowait(command)
