"""Apache's official Python client (PyPI ``rocketmq-python-client``) as a 5.x
PushConsumer, run in its own virtualenv like producer_client.py.

    python push_client.py ENDPOINT TOPIC GROUP SECONDS

Prints one JSON object per line: ``consumed`` per listener call (body,
delivery attempt, the result it returns), then ``done`` after SECONDS.  The
listener fails a message whose body starts with ``again`` on its first
attempt and one starting with ``bad`` always; it consumes everything else.
"""

import json
import sys
import threading
import time

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    MessageListener,
    PushConsumer,
)

_lock = threading.Lock()


def out(**kw):
    with _lock:
        print(json.dumps(kw), flush=True)


class Listener(MessageListener):
    def consume(self, message):
        body = message.body.decode()
        fail = body.startswith("bad") or (body.startswith("again") and
                                          message.delivery_attempt == 1)
        out(consumed={"body": body, "attempt": message.delivery_attempt,
                      "tag": message.tag, "result": "FAILURE" if fail else "SUCCESS"})
        return ConsumeResult.FAILURE if fail else ConsumeResult.SUCCESS


def main():
    endpoint, topic, group, seconds = sys.argv[1:5]
    consumer = PushConsumer(ClientConfiguration(endpoint, Credentials()), group, Listener(),
                            {topic: FilterExpression("*")})
    try:
        consumer.startup()
        out(started=True)
        time.sleep(float(seconds))
        out(done=True)
    except Exception as exc:  # the client's exception is the result under test
        out(error={"type": type(exc).__name__, "text": str(exc)})
    finally:
        consumer.shutdown()


if __name__ == "__main__":
    main()
