"""The compiled walks of a send-lane read's runs (``rmq._fast.lane_runs``)
count and notify exactly as their pure-Python twins: ``put_counts`` (the
store's statistics per topic, ``rmq.broker.send_lane._put_counts``) and
``on_runs`` (the broker's put counts and arrival listeners,
``rmq.broker.controller._on_runs``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rmq._fast import compiled, compiled_or_none
from rmq.broker import controller, send_lane
from rmq.broker.controller import BrokerController
from rmq.broker.stats import BrokerStats

FAST = compiled_or_none("lane_runs")

# RunQueue.summary tuples: (topic, queue id, next offset, tags, store time,
# messages, bytes, puts, each put (next offset, tags, store time, messages, bytes) or None)
ONE_TOPIC = [("A", q, q + 1, 7, 1000 + q, 1, 1100 + q, 1, None) for q in range(6)]
MIXED = [
    ("A", 0, 3, 11, 1000, 3, 300, 3, None),
    ("B", 5, 8, 22, 1001, 2, 200, 2, [(7, 21, 1000, 1, 90), (8, 22, 1001, 1, 110)]),
    ("A", 1, 1, 33, 1002, 4, 4000, 1, None),
    ("C", 0, 40, 44, 1003, 32, 3200, 1, [(40, 44, 1003, 32, 3200)]),
    ("B", 6, 2, 0, 1004, 1, 10, 1, None),
]
SHAPES = [ONE_TOPIC, ONE_TOPIC[:1], MIXED, MIXED[1:2], [], ONE_TOPIC + MIXED]


class _Stats:
    """A store's statistics that record ``on_puts``."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def on_puts(self, topic: str, count: int, size: int, puts: int) -> None:
        self.calls.append((topic, count, size, puts))


def test_the_compiled_walks_are_the_ones_in_use_when_built() -> None:
    if compiled("lane_runs") is None:  # not built, or the twins forced
        assert send_lane.put_counts is send_lane._put_counts
        assert controller.on_runs is controller._on_runs
        assert controller.on_counted_runs is controller._on_counted_runs
        return
    assert send_lane.put_counts is FAST.put_counts
    assert controller.on_runs is FAST.on_runs
    assert controller.on_counted_runs is FAST.on_counted_runs


@pytest.mark.parametrize("runs", SHAPES)
def test_put_counts_per_topic(runs: list[tuple]) -> None:
    ways = [send_lane._put_counts] + ([FAST.put_counts] if FAST is not None else [])
    got = []
    for way in ways:
        stats = _Stats()
        served = way(stats, list(runs))
        got.append((served, stats.calls))
    assert all(g == got[0] for g in got)
    assert got[0][0] == sum(run[5] for run in runs)
    assert [c[0] for c in got[0][1]] == list(dict.fromkeys(run[0] for run in runs))


def _listeners(ctl: SimpleNamespace, heard: list) -> SimpleNamespace:
    """One listener of each kind: without a runs form, with one behind a
    waiting holder, with one behind topics, and a plain runs form."""
    holder = SimpleNamespace(table={})
    BrokerController.add_arrival_listener(ctl, lambda *a: heard.append(("each", *a)))
    BrokerController.add_arrival_listener(ctl, lambda *a: None,
                                          lambda runs: heard.append(("waiting", len(runs))),
                                          waiting=(holder, "table"))
    BrokerController.add_arrival_listener(ctl, lambda *a: None,
                                          lambda runs: heard.append(("topics", len(runs))),
                                          topics=frozenset(("C",)))
    BrokerController.add_arrival_listener(ctl, lambda *a: None,
                                          lambda runs: heard.append(("runs", len(runs))))
    return holder


@pytest.mark.parametrize("counted", [False, True])
@pytest.mark.parametrize("histograms", [False, True])
def test_on_runs_counts_and_notifies_as_its_twin(histograms: bool, counted: bool) -> None:
    if counted:
        ways = [controller._on_counted_runs] + ([FAST.on_counted_runs] if FAST else [])
    else:
        ways = [controller._on_runs] + ([FAST.on_runs] if FAST is not None else [])
    got = []
    for way in ways:
        stats = BrokerStats()
        if histograms:
            stats.size_histograms = {}
        ctl = SimpleNamespace(stats=stats, _runs_forms=[])
        heard: list = []
        holder = _listeners(ctl, heard)
        for i, runs in enumerate(SHAPES * 2):  # new keys first, then counts added to them
            if i == len(SHAPES):
                holder.table[("A", 0)] = ["a held pull"]
            way(stats, ctl._runs_forms, list(runs))
        got.append((stats.put_total, {k: list(v) for k, v in stats._put_pending.items()},
                    heard))
    assert all(g == got[0] for g in got)
    # counted: the runs that list no puts were counted by the lane, total included
    assert got[0][0] == 2 * sum(run[5] for runs in SHAPES for run in runs
                                if not counted or run[8] is not None)


def test_on_runs_counts_across_folds_and_equal_topics_as_its_twin() -> None:
    """The compiled walk keeps each queue's pending row for the next runs of
    the same topic object: across a fold (a new pending table), for a topic
    equal to but not the one met before, for one of the same queue id under
    another topic and for queue ids past the kept ones it counts as the
    twin does."""
    ways = [controller._on_runs] + ([FAST.on_runs] if FAST is not None else [])
    got = []
    for way in ways:
        stats = BrokerStats()
        ctl = SimpleNamespace(stats=stats, _runs_forms=[])
        heard: list = []
        _listeners(ctl, heard)
        for i in range(6):
            topic = "".join(["Top", "ic"])  # (equal, another object each time)
            runs = [(t, q, i + 1, 0, 1000, 2, 200, 1, None)
                    for t in ("A", topic) for q in (0, 3, 63, 64, 2**70)]
            way(stats, ctl._runs_forms, runs)
            way(stats, ctl._runs_forms, runs[::-1])
            if i % 2:
                stats.fold(1000.0 + i)
        got.append((stats.put_total, {k: list(v) for k, v in stats._put_pending.items()},
                    {n: {k: list(v._buckets) for k, v in t.items()} for n, t in stats.items.items()},
                    heard))
    assert all(g == got[0] for g in got)
    assert got[0][0] == 6 * 2 * 10 * 2
