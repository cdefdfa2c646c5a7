"""Bad-request generators shared by the broker and name-server fuzz tests:
junk fields on every request code, and real request headers filled
plausibly with one or two fields then dropped or made wrong.  Every run is
drawn from a seeded ``random.Random``, so a failure repeats."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import re
from collections.abc import Iterable
from types import ModuleType

from rmq.remoting import RemotingClient, RemotingCommand

NUMBERS = ["0", "1", "3", "-1", "16", "2147483647", "-2147483648", "2147483648", "4294967296",
           "9223372036854775807", "-9223372036854775808", "99999999999999999999", "x", "",
           "1.0", " 1"]
ODD = ["true", "null", "UNIQ_KEY\x01abc\x02TAGS\x01t\x02WAIT\x01false\x02", "DELAY\x0199\x02",
       "TRAN_MSG\x01true\x02PGROUP\x01g\x02", "\x01\x02\x01", "TAGS\x01\x02",
       "0A00000100002A9F0000000000000000", "zz", "00" * 16, "127.0.0.1:10911", "a:b:c"]
BODIES = [None, b"", b"{}", b"[]", b"null", b'{"a":1}', b"\x00" * 16, b"garbage{",
          b'{"clientID":"x","producerDataSet":[{}],"consumerDataSet":[{"groupName":"g"}]}',
          b'{"mqSet":[{"topic":"t","brokerName":"b","queueId":-5}],"consumerGroup":"g"}',
          b"listenPort=1\nbrokerName=\n", bytes(range(200))]
# a Python error escaping a processor ("TypeError: ..., func(file:line)");
# header errors are RemotingCommandError, and domain errors are plain remarks
LEAKED = re.compile(r"^(?!RemotingCommandError)[A-Za-z_.]*(Error|Exception): ")


def header_classes(*modules: ModuleType) -> list[type]:
    return [cls for module in modules for cls in vars(module).values()
            if isinstance(cls, type) and dataclasses.is_dataclass(cls)]


def field_names(*modules: ModuleType) -> list[str]:
    """Every field name of the header classes in ``modules``."""
    return sorted({f.name for cls in header_classes(*modules) for f in dataclasses.fields(cls)})


def junk_requests(rnd: random.Random, rounds: int, codes: Iterable[int], names: list[str],
                  junk: list[str]) -> list[RemotingCommand]:
    """Every code in ``codes`` with random known field names set to junk."""
    codes = sorted(codes)
    out = []
    for _ in range(rounds):
        for code in codes:
            ext = {n: rnd.choice(junk) for n in rnd.sample(names, rnd.randrange(0, 12))}
            out.append(RemotingCommand.create_request(code, ext, rnd.choice(BODIES)))
    return out


def plausible(rnd: random.Random, cls: type, names: list[str]) -> dict[str, str]:
    """A header of ``cls`` filled with values a real client could send."""
    ext = {}
    for f in dataclasses.fields(cls):
        kind = str(f.type)
        if "int" in kind:
            ext[f.name] = rnd.choice(["0", "1", "3"])
        elif "bool" in kind:
            ext[f.name] = rnd.choice(["true", "false"])
        else:
            ext[f.name] = rnd.choice(names)
    return ext


def mutated_requests(rnd: random.Random, rounds: int, headers: dict[int, type],
                     names: list[str], junk: list[str]) -> list[RemotingCommand]:
    """Each code's header filled plausibly, then one or two fields dropped or
    replaced with junk."""
    out = []
    for _ in range(rounds):
        for code, cls in headers.items():
            ext = plausible(rnd, cls, names)
            for _ in range(rnd.randrange(1, 3)):
                if not ext:
                    break
                name = rnd.choice(list(ext))
                if rnd.random() < 0.2:
                    del ext[name]
                else:
                    ext[name] = rnd.choice(junk)
            body = rnd.choice([None, b"", b"hello", rnd.randbytes(64)])
            out.append(RemotingCommand.create_request(int(code), ext, body))
    return out


async def storm(client: RemotingClient, addr: str,
                requests: list[RemotingCommand]) -> tuple[list[tuple], set[int]]:
    """Send ``requests`` 32 at a time (each must be answered within 5 s);
    returns the answers whose remark is a leaked Python error, and the
    response codes seen."""
    leaked, codes = [], set()
    for start in range(0, len(requests), 32):
        chunk = requests[start:start + 32]
        answers = await asyncio.gather(*(client.invoke(addr, req, 5000) for req in chunk))
        for req, resp in zip(chunk, answers, strict=True):
            codes.add(resp.code)
            if resp.remark and LEAKED.match(resp.remark):
                leaked.append((req.code, req.ext_fields, resp.remark))
    return leaked, codes
