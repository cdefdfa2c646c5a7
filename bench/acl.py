"""What plain ACL costs per request: the client's signature (``AclClientRPCHook``)
and the broker's check (``PlainAccessValidator``: resources, account, HMAC-SHA1
over the extFields values and the body, permissions) of a SEND_MESSAGE_V2 with
the C++ client's 13 header fields, for a few body sizes.  With aclEnable=false
the broker runs no hook at all (one empty-list test per request).

    .venv/bin/python -m bench.acl [--count N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from rmq.acl import AclClientRPCHook, SessionCredentials
from rmq.acl.validator import PlainAccessValidator
from rmq.common.codes import RequestCode
from rmq.remoting import RemotingCommand

V2_EXT = {"a": "please_rename_unique_group_name", "b": "BenchmarkTest", "c": "TBW102",
          "d": "4", "e": "3", "f": "0", "g": "1700000000000", "h": "0",
          "i": "UNIQ_KEY\x017F0000010B3C18B4AAC2A9F3E10000\x02WAIT\x01true\x02TAGS\x01TagA",
          "j": "0", "k": "false", "m": "false", "n": "broker-a"}
RULES = ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n"
         "    defaultTopicPerm: DENY\n    defaultGroupPerm: SUB\n"
         "    topicPerms: [BenchmarkTest=PUB|SUB]\n")


def measure(count: int, size: int, validator: PlainAccessValidator) -> tuple[float, float]:
    """(client µs, broker µs) per request, best of three rounds."""
    hook = AclClientRPCHook(SessionCredentials("RocketMQ", "12345678"))
    body = b"x" * size
    best_sign = best_check = float("inf")
    for _ in range(3):
        reqs = [RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, dict(V2_EXT), body)
                for _ in range(count)]
        t0 = time.perf_counter()
        for r in reqs:
            hook.do_before_request(None, r)
        t1 = time.perf_counter()
        for r in reqs:
            validator.do_before_request("127.0.0.1:40000", r)
        t2 = time.perf_counter()
        best_sign = min(best_sign, (t1 - t0) / count * 1e6)
        best_check = min(best_check, (t2 - t1) / count * 1e6)
    return best_sign, best_check


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=20000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        (Path(home) / "conf").mkdir()
        (Path(home) / "conf" / "plain_acl.yml").write_text(RULES)
        validator = PlainAccessValidator(home)
        print("| body | client sign µs/req | broker check µs/req |")
        print("|---|---|---|")
        for size in (0, 1024, 4096, 65536):
            sign, check = measure(args.count, size, validator)
            print(f"| {size} B | {sign:.2f} | {check:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
