"""Apache's official Python client (PyPI ``rocketmq-python-client``) as a 5.x
PushConsumer, run in its own virtualenv like producer_client.py.

    python push_client.py ENDPOINT TOPIC GROUP SECONDS

Prints one JSON object per line: ``consumed`` per listener call (body,
delivery attempt, the result it returns), ``acked`` per ack (body, error or
null), then ``done`` after SECONDS.  The listener fails a message whose body
starts with ``again`` on its first attempt and one starting with ``bad``
always; one starting with ``slow`` takes ``RMQ5_SLOW_S`` seconds (default 10);
it consumes everything else.
"""

import os
import sys
import time

from driver import configuration, out, run
from rocketmq import ConsumeResult, FilterExpression, MessageListener, PushConsumer


class Listener(MessageListener):
    def consume(self, message):
        body = message.body.decode()
        if body.startswith("slow"):
            time.sleep(float(os.environ.get("RMQ5_SLOW_S", "10")))
        fail = body.startswith("bad") or (body.startswith("again") and
                                          message.delivery_attempt == 1)
        out(consumed={"body": body, "attempt": message.delivery_attempt,
                      "tag": message.tag, "result": "FAILURE" if fail else "SUCCESS"})
        return ConsumeResult.FAILURE if fail else ConsumeResult.SUCCESS


class AckReportingPushConsumer(PushConsumer):
    """The client's own PushConsumer; each ack's outcome is printed."""

    def _ack(self, message):
        try:
            super()._ack(message)
        except Exception as exc:
            out(acked={"body": message.body.decode(), "error": f"{type(exc).__name__}: {exc}"})
            raise
        out(acked={"body": message.body.decode(), "error": None})


def main():
    endpoint, topic, group, seconds = sys.argv[1:5]
    consumer = AckReportingPushConsumer(configuration(endpoint), group, Listener(),
                                        {topic: FilterExpression("*")})

    def scenario():
        out(started=True)
        time.sleep(float(seconds))

    run(consumer, scenario)


if __name__ == "__main__":
    main()
