"""Load driver for bench/grpc.py ``--official``: Apache's official Python client
(PyPI ``rocketmq-python-client`` 5.1.2), run with the interpreter of its own
virtualenv (``.venv-rmq5``; its package ``rocketmq`` clashes with the C++
wrapper of the same name).

    python -m bench.grpc_official ENDPOINT send|receive TOPIC GROUP COUNT SIZE THREADS

``send``: COUNT messages of SIZE bytes, THREADS threads each calling the
blocking ``Producer.send``; ``receive``: THREADS threads of one SimpleConsumer,
each ``receive(32)`` then ``ack`` per message, until COUNT are acked.  Prints
one JSON line: messages, seconds of the load (start-up excluded).
"""

import json
import sys
import threading
import time

from rocketmq import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
)


def run_threads(threads, work):
    pool = [threading.Thread(target=work) for _ in range(threads)]
    began = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return time.perf_counter() - began


def send(endpoint, topic, count, size, threads):
    producer = Producer(ClientConfiguration(endpoint, Credentials()), (topic,))
    producer.startup()
    time.sleep(1.5)  # its Settings answered (max body size) before the first send
    left = [count]
    lock = threading.Lock()
    body = b"x" * size

    def work():
        while True:
            with lock:
                if left[0] <= 0:
                    return
                left[0] -= 1
            m = Message()
            m.topic, m.body, m.tag = topic, body, "T"
            producer.send(m)

    try:
        return count, run_threads(threads, work)
    finally:
        producer.shutdown()


def receive(endpoint, topic, group, count, threads):
    consumer = SimpleConsumer(ClientConfiguration(endpoint, Credentials()), group,
                              {topic: FilterExpression("*")}, await_duration=5)
    consumer.startup()
    time.sleep(1.5)
    acked = [0]
    lock = threading.Lock()

    def work():
        while acked[0] < count:
            for m in consumer.receive(32, 60) or []:
                consumer.ack(m)
                with lock:
                    acked[0] += 1

    try:
        seconds = run_threads(threads, work)
        return acked[0], seconds
    finally:
        consumer.shutdown()


def main():
    endpoint, what, topic, group, count, size, threads = sys.argv[1:8]
    count, size, threads = int(count), int(size), int(threads)
    if what == "send":
        msgs, seconds = send(endpoint, topic, count, size, threads)
    else:
        msgs, seconds = receive(endpoint, topic, group, count, threads)
    print(json.dumps({"msgs": msgs, "seconds": seconds}), flush=True)


if __name__ == "__main__":
    main()
