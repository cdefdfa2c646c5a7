"""Apache's official Python client (PyPI ``rocketmq-python-client``) as a
5.x producer, run in its own virtualenv (its package ``rocketmq`` clashes
with the C++ wrapper of the same name that the interop tests use).

    python producer_client.py ENDPOINT SCENARIO TOPIC [CHECK_WAIT_S [SETTLE_S]]

Prints one JSON object per line: a ``receipt`` per message sent, ``check``
when the server asked the transaction checker, ``error`` with the exception
text when a send fails, and ``done`` at the end.  Scenarios: normal, fifo,
delay, transaction, bad.
"""

import sys
import threading
import time

from driver import configuration, out
from rocketmq import Message, Producer, TransactionChecker, TransactionResolution


def receipt(r, body):
    out(receipt={"message_id": r.message_id, "offset": r.offset,
                 "transaction_id": r.transaction_id, "body": body})


def message(topic, body, tag="TagA", keys=("k1", "k2"), props=None):
    m = Message()
    m.topic = topic
    m.body = body.encode()
    if tag:
        m.tag = tag
    for key in keys:  # the setter adds one key per assignment
            m.keys = key
    for k, v in (props or {"color": "red"}).items():
        m.add_property(k, v)
    return m


class Checker(TransactionChecker):
    def __init__(self):
        self.checked = threading.Event()

    def check(self, msg):
        out(check={"message_id": msg.message_id, "body": msg.body.decode()})
        self.checked.set()
        return TransactionResolution.COMMIT


def try_send(producer, msg, body, transaction=None):
    try:
        receipt(producer.send(msg, transaction) if transaction else producer.send(msg), body)
    except Exception as exc:  # the client's exception is the result under test
        out(error={"body": body, "type": type(exc).__name__, "text": str(exc)})


def main():
    endpoint, scenario, topic = sys.argv[1:4]
    # RMQ5_AK / RMQ5_SK: the plain ACL account to sign with (none by default)
    config = configuration(endpoint)
    checker = Checker() if scenario == "transaction" else None
    producer = Producer(config, (topic,), checker) if checker else Producer(config, (topic,))
    producer.startup()
    # the client checks a message's type against the route until the server's
    # Settings arrive (validate_message_type); give the handshake its moment
    time.sleep(float(sys.argv[5]) if len(sys.argv) > 5 else 0)
    try:
        if scenario == "normal":
            for i in range(3):
                try_send(producer, message(topic, f"normal-{i}"), f"normal-{i}")
        elif scenario == "fifo":
            for i in range(4):
                m = message(topic, f"fifo-{i}")
                m.message_group = "order-1"
                try_send(producer, m, f"fifo-{i}")
        elif scenario == "delay":
            m = message(topic, "delay-0")
            m.delivery_timestamp = int(time.time()) + 3
            try_send(producer, m, "delay-0")
        elif scenario == "bad":
            m = message(topic, "bad-prop", props={"TAGS": "x"})
            try_send(producer, m, "bad-prop")
        elif scenario == "transaction":
            for body, end in (("tx-commit", "commit"), ("tx-rollback", "rollback"),
                              ("tx-check", None)):
                tx = producer.begin_transaction()
                try_send(producer, message(topic, body), body, tx)
                if end == "commit":
                    tx.commit()
                elif end == "rollback":
                    tx.rollback()
            out(waiting_check=True)
            checker.checked.wait(float(sys.argv[4]) if len(sys.argv) > 4 else 30)
            time.sleep(1)  # the checker's EndTransaction is sent after check() returns
        out(done=True)
    finally:
        producer.shutdown()


if __name__ == "__main__":
    main()
