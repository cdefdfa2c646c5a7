"""What the official-client drivers of this directory share (each runs as a
script in the client's own virtualenv, so this module is imported from the
script's directory): one JSON object per line on stdout, safe from the
client's consumption threads; the plain ACL account from ``RMQ5_AK`` /
``RMQ5_SK`` (none by default); and the life of a client: start it, run the
scenario, print ``done`` (or the client's exception as ``error``, which is
the result under test), shut it down."""

import json
import os
import threading

from rocketmq import ClientConfiguration, Credentials

_lock = threading.Lock()


def out(**kw):
    with _lock:
        print(json.dumps(kw), flush=True)


def configuration(endpoint):
    return ClientConfiguration(endpoint, Credentials(os.environ.get("RMQ5_AK", ""),
                                                     os.environ.get("RMQ5_SK", "")))


def run(client, scenario):
    """Start ``client``, run ``scenario()``, report, shut the client down."""
    try:
        client.startup()
        scenario()
        out(done=True)
    except Exception as exc:  # the client's exception is the result under test
        out(error={"type": type(exc).__name__, "text": str(exc)})
    finally:
        client.shutdown()
