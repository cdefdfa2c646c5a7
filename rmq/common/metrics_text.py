"""Prometheus text for families with many series, written without a dict per sample.

``prometheus_client`` builds one ``Sample`` with a label dict per series and
sorts that dict again for every line it writes; with 10,000 topic/group
series a scrape spent most of its time there.  A ``RowFamily`` keeps its
label names once and each series as a tuple of values, and ``render`` writes
it from a template made once per family.  Every other family is written by
``prometheus_client`` itself, and ``samples`` still yields real samples, so
``generate_latest`` and ``render`` give the same bytes (a unit test holds
them to it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

_INF = float("inf")


class RowFamily(Metric):
    """A counter, gauge or histogram family whose series share one tuple of
    label names; a histogram row carries cumulative ``(le, count)`` buckets
    and a sum, as ``HistogramMetricFamily.add_metric`` takes them."""

    def __init__(self, name: str, documentation: str, typ: str,
                 labels: Sequence[str]) -> None:
        super().__init__(name, documentation, typ)
        self.labelnames = tuple(labels)
        self.rows: list[tuple] = []

    def add_metric(self, values: tuple, value: float) -> None:
        self.rows.append((values, value))

    def add_histogram(self, values: tuple, buckets: list[tuple[str, float]],
                      sum_value: float) -> None:
        self.rows.append((values, buckets, sum_value))

    # prometheus_client's view: real samples, made only when asked for
    @property
    def samples(self) -> list[Sample]:  # type: ignore[override]
        names = self.labelnames
        out = []
        if self.type == "histogram":
            for values, buckets, total in self.rows:
                labels = dict(zip(names, values, strict=True))
                for le, count in buckets:
                    out.append(Sample(self.name + "_bucket", dict(labels, le=le), count))
                out.append(Sample(self.name + "_count", labels, buckets[-1][1]))
                out.append(Sample(self.name + "_sum", labels, total))
            return out
        suffix = "_total" if self.type == "counter" else ""
        for values, value in self.rows:
            out.append(Sample(self.name + suffix, dict(zip(names, values, strict=True)), value))
        return out

    @samples.setter
    def samples(self, _value: list) -> None:
        """Metric.__init__ sets an empty list; the rows are the samples."""


class _One:
    """One family as a collector, for ``generate_latest``."""

    def __init__(self, metric: Metric) -> None:
        self.metric = metric

    def collect(self) -> Iterable[Metric]:
        return (self.metric,)


def render(collector) -> bytes:
    """The Prometheus text format of everything ``collector`` yields."""
    out: list[bytes] = []
    for metric in collector.collect():
        if isinstance(metric, RowFamily):
            out.append(_render_rows(metric).encode())
        else:
            out.append(generate_latest(_One(metric)))
    return b"".join(out)


def _escape_doc(doc: str) -> str:
    return doc.replace("\\", r"\\").replace("\n", r"\n")


def _escape_value(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _template(names: tuple[str, ...]) -> str:
    """``a="{0}",b="{1}"`` in sorted name order, for ``str.format``."""
    order = sorted(range(len(names)), key=names.__getitem__)
    return ",".join(f'{names[i]}="{{{i}}}"' for i in order)


def _number(value: float) -> str:
    if type(value) is int and -1_000_000 < value < 1_000_000:
        return f"{value}.0"  # floatToGoString of a small integer
    return floatToGoString(value)


def _render_rows(metric: RowFamily) -> str:
    name, typ = metric.name, metric.type
    shown = name + "_total" if typ == "counter" else name
    lines = [f"# HELP {shown} {_escape_doc(metric.documentation)}\n",
             f"# TYPE {shown} {typ}\n"]
    names = metric.labelnames

    def escaped(values: tuple) -> tuple | list[str]:
        joined = "".join(values)  # one scan of the row for the three characters
        if "\\" in joined or '"' in joined or "\n" in joined:
            return [_escape_value(v) for v in values]
        return values

    append = lines.append
    if typ != "histogram":
        fmt = _template(names).format
        head = shown + "{"
        for values, value in metric.rows:
            append(f"{head}{fmt(*escaped(values))}}} {_number(value)}\n")
        return "".join(lines)
    with_le = _template((*names, "le")).format
    plain = _template(names).format
    bucket, count, total = name + "_bucket{", name + "_count{", name + "_sum{"
    for values, buckets, sum_value in metric.rows:
        esc = escaped(values)
        for le, n in buckets:
            append(f"{bucket}{with_le(*esc, le)}}} {_number(n)}\n")
        labels = plain(*esc)
        append(f"{count}{labels}}} {_number(buckets[-1][1])}\n")
        append(f"{total}{labels}}} {_number(sum_value)}\n")
    return "".join(lines)
