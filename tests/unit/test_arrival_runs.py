"""The send lane's arrivals told once per read (``BrokerController.runs_listener``)
count and notify exactly what the per-run listener (``_on_message_arriving``)
does for every run, and for every put of a run that lists its puts."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from rmq.broker.controller import BrokerController, on_runs
from rmq.broker.pop_polling import PopPolling
from rmq.broker.stats import BrokerStats

# RunQueue.summary: (topic, queue id, next offset, tags, store time, messages,
# bytes, puts, each put (next offset, tags, store time, messages, bytes) or None)
RUNS = [
    ("A", 0, 3, 11, 1000, 3, 300, 3, None),
    ("B", 5, 8, 22, 1001, 2, 200, 2, [(7, 21, 1000, 1, 90), (8, 22, 1001, 1, 110)]),
    ("A", 1, 1, 33, 1002, 4, 4000, 1, None),
    ("C", 0, 40, 44, 1003, 32, 3200, 1, [(40, 44, 1003, 32, 3200)]),
]


def _controller(stats: BrokerStats) -> SimpleNamespace:
    return SimpleNamespace(stats=stats, _runs_forms=[])


def _runs(ctl: SimpleNamespace, runs: list[tuple]) -> None:
    """What the controller's ``runs_listener`` does."""
    on_runs(ctl.stats, ctl._runs_forms, runs)


def _per_run(ctl: SimpleNamespace) -> None:
    """What the lane told the store's per-run listener before runs were told at once."""
    for topic, qid, qoff, tags, ts, nums, size, events, each in RUNS:
        if each is None:
            BrokerController._on_message_arriving(ctl, topic, qid, qoff, tags, ts, nums, size,
                                                  events)
        else:
            for next_offset, last_tags, last_ts, put_nums, put_size in each:
                BrokerController._on_message_arriving(ctl, topic, qid, next_offset, last_tags,
                                                      last_ts, put_nums, put_size)


@pytest.mark.parametrize("histograms", [False, True])
def test_runs_count_and_notify_as_each_run(histograms: bool) -> None:
    heard: dict[str, list] = {"each": [], "runs": []}
    results = []
    for way in ("each", "runs"):
        stats = BrokerStats()
        if histograms:
            stats.size_histograms = {}
        ctl = _controller(stats)
        calls = heard[way]
        # a listener without a runs form hears every run and put as before
        BrokerController.add_arrival_listener(ctl, lambda *a, calls=calls: calls.append(a))
        for _ in range(2):  # the queues' first counts, then counts added to them
            if way == "each":
                _per_run(ctl)
            else:
                _runs(ctl, RUNS)
        results.append((stats.put_total, dict(stats._put_pending)))
    assert results[0] == results[1]
    assert results[0][0] == 82
    assert heard["each"] == heard["runs"]
    assert len(heard["runs"]) == 10  # two runs, then three puts listed one by one; twice


def test_a_runs_form_is_called_once_per_read() -> None:
    async def scenario() -> None:
        polling = PopPolling(16)
        waiter = asyncio.ensure_future(polling.wait(["B"], 5.0))
        other = asyncio.ensure_future(polling.wait(["Z"], 0.2))
        await asyncio.sleep(0)
        forms: list[int] = []
        ctl = _controller(BrokerStats())

        def runs_form(runs: list[tuple]) -> None:
            forms.append(len(runs))
            polling.notify_runs(runs)

        BrokerController.add_arrival_listener(ctl, polling.notify, runs_form)
        _runs(ctl, RUNS)
        assert forms == [len(RUNS)]
        assert await asyncio.wait_for(waiter, 1.0) is True  # a message of B arrived
        assert await other is False  # nothing of Z: it times out

    asyncio.run(scenario())


def test_a_runs_form_nobody_waits_on_is_not_called() -> None:
    """A listener that waits for nothing, or whose topics the read does not
    hold, is skipped; it hears the read once it waits or a topic of its is in."""
    ctl = _controller(BrokerStats())
    holder = SimpleNamespace(table={})
    heard: dict[str, list[int]] = {"waiting": [], "topics": [], "plain": []}
    BrokerController.add_arrival_listener(ctl, lambda *a: None,
                                          lambda runs: heard["waiting"].append(len(runs)),
                                          waiting=(holder, "table"))
    BrokerController.add_arrival_listener(ctl, lambda *a: None,
                                          lambda runs: heard["topics"].append(len(runs)),
                                          topics=frozenset(("T",)))
    BrokerController.add_arrival_listener(ctl, lambda *a: None,
                                          lambda runs: heard["plain"].append(len(runs)))
    _runs(ctl, RUNS)
    assert heard == {"waiting": [], "topics": [], "plain": [4]}
    holder.table[("A", 0)] = ["a held pull"]
    _runs(ctl, RUNS + [("T", 0, 1, 0, 1004, 1, 10, 1, None)])
    assert heard == {"waiting": [5], "topics": [5], "plain": [4, 5]}
    assert ctl.stats.put_total == 41 * 2 + 1


def _arriving_impls() -> list:
    """``_on_message_arriving``: the twin and the compiled one (when built)."""
    from rmq._fast import compiled_or_none
    from rmq.broker import controller

    c = compiled_or_none("arrival")
    return [controller._on_message_arriving] + ([c.on_message_arriving] if c else [])


@pytest.mark.parametrize("arriving", _arriving_impls())
def test_a_put_skips_listeners_that_would_do_nothing(arriving) -> None:
    """A single put tells a listener with ``waiting`` only while its holder
    shows somebody waits, and one with ``topics`` only of those topics (the
    twin and the compiled listener alike, counts included)."""
    heard: list[tuple] = []
    holder = SimpleNamespace(waiters={})
    ctl = _controller(BrokerStats())
    BrokerController.add_arrival_listener(ctl, lambda *a: heard.append(("w", *a)), None,
                                          waiting=(holder, "waiters"))
    BrokerController.add_arrival_listener(ctl, lambda *a: heard.append(("t", *a)), None,
                                          topics=frozenset(("T",)))
    BrokerController.add_arrival_listener(ctl, lambda *a: heard.append(("a", *a)))
    arriving(ctl, "A", 0, 1, 0, 5)
    arriving(ctl, "T", 0, 2, 0, 6)
    holder.waiters["A"] = {1}
    arriving(ctl, "A", 0, 3, 0, 7, 4, 400, 2)
    assert heard == [("a", "A", 0, 1, 0, 5), ("t", "T", 0, 2, 0, 6), ("a", "T", 0, 2, 0, 6),
                     ("w", "A", 0, 3, 0, 7), ("a", "A", 0, 3, 0, 7)]
    assert ctl.stats.put_total == 6
    assert ctl.stats._put_pending[("A", 0)][:3] == [5, 3, 400]  # messages, puts, bytes


@pytest.mark.parametrize("arriving", _arriving_impls())
def test_waiting_read_at_the_holders_slot_as_through_its_attribute(arriving) -> None:
    """A ``waiting`` holder whose attribute is a slot (the broker's PopPolling)
    and one of another class at the same place of another controller's
    forms: each put heard only while its holder shows somebody waits (the
    twin and the compiled listener alike); an unset slot raises as the
    attribute does."""
    heard: list[tuple] = []
    polling = PopPolling(10)
    plain = SimpleNamespace(waiters={})
    ctls = []
    for holder in (polling, plain):
        ctl = _controller(BrokerStats())
        BrokerController.add_arrival_listener(ctl, lambda *a, h=holder: heard.append((h, *a)),
                                              None, waiting=(holder, "waiters"))
        ctls.append(ctl)
    for n in range(4):
        for ctl, holder in zip(ctls, (polling, plain), strict=True):
            arriving(ctl, "A", 0, n, 0, 5)
            holder.waiters = {"A": {1}} if n % 2 == 0 else {}
    assert heard == [(h, "A", 0, n, 0, 5) for n in (1, 3) for h in (polling, plain)]
    unset = _controller(BrokerStats())
    BrokerController.add_arrival_listener(unset, lambda *a: None, None,
                                          waiting=(PopPolling.__new__(PopPolling), "waiters"))
    with pytest.raises(AttributeError):
        arriving(unset, "A", 0, 1, 0, 5)
