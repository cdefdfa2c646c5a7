"""rmq's RocketMQ client on asyncio: ``Producer``, ``TransactionProducer``,
``PushConsumer``, ``LitePullConsumer`` and ``MQAdmin``, speaking the 4.9.8
remoting protocol to any compatible name server and broker.  See docs/client.md."""

from rmq.client.admin import MQAdmin
from rmq.client.allocate import AllocateMessageQueueAveragely, AllocateMessageQueueAveragelyByCircle
from rmq.client.config import ClientConfig, ConsumerConfig, ProducerConfig
from rmq.client.exceptions import MQBrokerError, MQClientError
from rmq.client.heartbeat import ConsumeFromWhere, MessageModel
from rmq.client.message import (
    Message,
    MessageExt,
    MessageQueue,
    PullResult,
    PullStatus,
    SendResult,
    SendStatus,
)
from rmq.client.message_selector import MessageSelector
from rmq.client.producer import Producer
from rmq.client.pull_consumer import LitePullConsumer
from rmq.client.push_consumer import (
    ConsumeContext,
    ConsumeOrderlyStatus,
    ConsumeStatus,
    PushConsumer,
)
from rmq.client.request_reply import RequestTimeoutError, create_reply_message
from rmq.client.selector import select_by_hash, select_by_random
from rmq.client.transaction_producer import (
    LocalTransactionState,
    TransactionListener,
    TransactionProducer,
    TransactionSendResult,
)

__all__ = [
    "AllocateMessageQueueAveragely", "AllocateMessageQueueAveragelyByCircle", "ClientConfig",
    "ConsumeContext", "ConsumeFromWhere", "ConsumeOrderlyStatus", "ConsumeStatus", "ConsumerConfig",
    "LitePullConsumer", "LocalTransactionState", "MQAdmin", "MQBrokerError", "MQClientError",
    "Message", "MessageExt", "MessageModel", "MessageQueue", "MessageSelector", "ProducerConfig",
    "Producer",
    "PullResult", "PullStatus", "PushConsumer", "RequestTimeoutError", "SendResult", "SendStatus",
    "TransactionListener", "TransactionProducer", "TransactionSendResult", "create_reply_message",
    "select_by_hash", "select_by_random",
]
