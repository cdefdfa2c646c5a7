"""Apache's official Python client (PyPI ``rocketmq-python-client``) as a 5.x
SimpleConsumer, run in its own virtualenv like producer_client.py.

    python consumer_client.py ENDPOINT SCENARIO TOPIC GROUP COUNT [TAG_EXPRESSION]

Prints one JSON object per line: ``got`` per message received (body, tag,
keys, properties, delivery attempt), ``acked`` / ``changed`` per call,
``error`` with the exception text, and ``done``.  Scenarios:

* ``ack``: receive COUNT messages and ack each;
* ``redeliver``: receive without ack (invisible 10 s), receive them again
  after the invisible time, then ack;
* ``change``: receive, change the invisible time to 12 s, then ack with the
  handle the change returned (it must stick: nothing comes back);
* ``keep``: receive and ack until COUNT distinct bodies are acked, for up to
  150 s, going on after a failed receive or ack (``failed`` with the error):
  the consumer under a broker restart.
"""

import sys
import time

from driver import configuration, out, run
from rocketmq import FilterExpression, SimpleConsumer


def got(m):
    out(got={"body": m.body.decode(), "tag": m.tag, "keys": sorted(m.keys),
             "properties": dict(m.properties), "attempt": m.delivery_attempt,
             "message_id": m.message_id})


def receive_n(consumer, count, invisible, deadline_s=40):
    msgs = []
    deadline = time.monotonic() + deadline_s
    while len(msgs) < count and time.monotonic() < deadline:
        for m in consumer.receive(32, invisible) or []:
            got(m)
            msgs.append(m)
    return msgs


def keep(consumer, count, deadline_s=150):
    """Receive and ack until ``count`` distinct bodies are acked."""
    acked = set()
    deadline = time.monotonic() + deadline_s
    while len(acked) < count and time.monotonic() < deadline:
        try:
            msgs = consumer.receive(32, 15) or []
        except Exception as exc:  # the restart window: report and go on
            out(failed={"op": "receive", "type": type(exc).__name__, "text": str(exc)})
            time.sleep(0.5)
            continue
        for m in msgs:
            got(m)
            try:
                consumer.ack(m)
            except Exception as exc:  # not acked: it comes back after the invisible time
                out(failed={"op": "ack", "type": type(exc).__name__, "text": str(exc)})
                continue
            acked.add(m.body.decode())
            out(acked=m.message_id, body=m.body.decode())
    if len(acked) < count:
        raise TimeoutError(f"only {len(acked)} of {count} acked")


def scenario(consumer, name, count):
    if name == "keep":
        keep(consumer, count)
        return
    msgs = receive_n(consumer, count, 10 if name == "redeliver" else 15)
    if name == "redeliver":
        msgs = receive_n(consumer, count, 15)
    if name == "change":
        for m in msgs:
            consumer.change_invisible_duration(m, 12)
            out(changed=m.message_id)
    for m in msgs:
        consumer.ack(m)
        out(acked=m.message_id)
    if name == "change":
        again = receive_n(consumer, 1, 15, deadline_s=20)
        out(after_change=len(again))


def main():
    endpoint, name, topic, group, count = sys.argv[1:6]
    tags = sys.argv[6] if len(sys.argv) > 6 else "*"
    consumer = SimpleConsumer(configuration(endpoint), group,
                              {topic: FilterExpression(tags)}, await_duration=5)
    run(consumer, lambda: scenario(consumer, name, int(count)))


if __name__ == "__main__":
    main()
