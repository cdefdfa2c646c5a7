"""``rocketmq_rpc_latency``: how long each request took, as RocketMQ 5.3 records it.

5.3's ``RemotingMetricsManager`` times every request from its arrival to the
write of its response, in whole milliseconds, into a histogram with the
buckets 1, 3, 5, 7, 10, 100, 1000, 2000 and 3000 ms, labelled with the
request and response codes' lower-case names, whether the request was a
long-polling pull that was held, and how the response went out (success,
oneway, write_channel_failed, process_request_failed).

The recorder keeps one row of bucket counts per label combination: a
request costs a clock read on arrival, one on completion and a few integer
additions, and only when the exporter is on (the remoting service holds no
recorder otherwise).
"""

from __future__ import annotations

from bisect import bisect_left
from time import perf_counter

from rmq._fast import compiled
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.metrics_text import RowFamily

BUCKETS_MS = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)
_LE = tuple(str(float(b)) for b in BUCKETS_MS) + ("+Inf",)

# how the response went out (the ``result`` label), by index into RESULTS
SUCCESS, ONEWAY, WRITE_CHANNEL_FAILED, PROCESS_REQUEST_FAILED = range(4)
RESULTS = ("success", "oneway", "write_channel_failed", "process_request_failed")
_NO_RESPONSE = 0xFFFF

LABELS = ("protocol_type", "request_code", "response_code", "is_long_polling", "result")


def _names(enum) -> dict[int, str]:
    """Value -> lower-case name, the first name of a value winning."""
    names: dict[int, str] = {}
    for member in enum.__members__.values():
        names.setdefault(int(member), member.name.lower())
    return names


_REQUEST_NAMES = _names(RequestCode)
_RESPONSE_NAMES = _names(ResponseCode)


def request_code_desc(code: int) -> str:
    """``RemotingHelper.getRequestCodeDesc``: the constant's name in lower case,
    or the number for a code it does not know."""
    return _REQUEST_NAMES.get(code) or str(code)


def response_code_desc(code: int) -> str:
    return _RESPONSE_NAMES.get(code) or str(code)


class _RpcLatency:
    """Histogram rows keyed by (request code, response code, long polling,
    result), packed into one integer so that a record hashes no tuple."""

    __slots__ = ("rows",)

    def __init__(self) -> None:
        # packed key -> [count per bucket ..., count above the last bucket, sum of ms]
        self.rows: dict[int, list[int]] = {}

    def record(self, request_code: int, response_code: int | None, long_polling: bool,
               result: int, elapsed_ms: int, count: int = 1) -> None:
        """``result`` is SUCCESS, ONEWAY, WRITE_CHANNEL_FAILED or PROCESS_REQUEST_FAILED;
        ``count`` like requests that each took ``elapsed_ms``."""
        key = ((request_code << 24) | ((_NO_RESPONSE if response_code is None
                                        else response_code & 0xFFFF) << 8)
               | (long_polling << 3) | result)
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = [0] * (len(BUCKETS_MS) + 2)
        row[0 if elapsed_ms <= 1 else bisect_left(BUCKETS_MS, elapsed_ms)] += count
        row[-1] += elapsed_ms * count

    def record_since(self, start: float, request_code: int, response_code: int | None,
                     result: int) -> None:
        """``record`` of a request that arrived at ``start`` (``perf_counter()``)
        and was not held for long polling."""
        self.record(request_code, response_code, False, result,
                    int((perf_counter() - start) * 1000))


RpcLatency = _RpcLatency
_c = compiled("rpc_latency")
if _c is not None:
    RpcLatency = _c.RpcLatency  # the compiled twin: the same record and rows


class NamedLatency:
    """Rows of ``rocketmq_rpc_latency`` for calls of another protocol, keyed by
    names: the gRPC endpoint records each RPC under ``protocol_type`` "grpc",
    its method in snake case (``receive_message``) as request code and the 5.x
    status code's name as response code."""

    __slots__ = ("protocol", "rows")

    def __init__(self, protocol: str) -> None:
        self.protocol = protocol
        self.rows: dict[tuple[str, str, bool, int], list[int]] = {}

    def record(self, request: str, response: str, long_polling: bool, result: int,
               elapsed_ms: int) -> None:
        key = (request, response, long_polling, result)
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = [0] * (len(BUCKETS_MS) + 2)
        row[0 if elapsed_ms <= 1 else bisect_left(BUCKETS_MS, elapsed_ms)] += 1
        row[-1] += elapsed_ms


def _cumulative(row: list[int]) -> list[tuple[str, int]]:
    running, buckets = 0, []
    for le, n in zip(_LE, row, strict=False):
        running += n
        buckets.append((le, running))
    return buckets


def latency_family(latency: _RpcLatency, base_labels: tuple[str, ...],
                   base_values: tuple[str, ...], named: NamedLatency | None = None
                   ) -> RowFamily:
    """The histogram as 5.3 exports it, with the process's own labels first
    (and the rows of ``named``, another protocol's calls, in the same family).
    A label 5.3 leaves off a data point (the response code of a request whose
    processor failed) is written empty, which Prometheus reads as absent."""
    family = RowFamily("rocketmq_rpc_latency", "request latency (ms)", "histogram",
                       (*base_labels, *LABELS))
    if named is not None:
        for (request, response, polling, result), row in list(named.rows.items()):
            family.add_histogram((*base_values, named.protocol, request, response,
                                  "true" if polling else "false", RESULTS[result]),
                                 _cumulative(row), row[-1])
    for key, row in list(latency.rows.items()):
        request, response = key >> 24, (key >> 8) & 0xFFFF
        running, buckets = 0, []
        for le, n in zip(_LE, row, strict=False):
            running += n
            buckets.append((le, running))
        values = (*base_values, "remoting", request_code_desc(request),
                  "" if response == _NO_RESPONSE else response_code_desc(response),
                  "true" if key & 8 else "false", RESULTS[key & 7])
        family.add_histogram(values, buckets, row[-1])
    return family
