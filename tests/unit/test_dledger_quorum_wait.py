"""A DLedger lane read's quorum wait (``wait_quorum_then``): the compiled
one (rmq._fast.dledger_frames.wait_quorum_then, its group made in place)
and its twin (rmq.dledger.pusher._wait_quorum_then: ``EntryPusher.wait_quorum``,
``_new_group``, ``AckGroup.__init__``, ``_appended_more``) leave the same
groups -- term, first, last, callbacks, outcome, settled, the open one --
after the same waits: joining the open group, a new one after a push (the
open group reset), after a settled one, for another outcome, for an index
not past the open group's, a lane's read joining a put's group of a future;
a term change failing the older terms' waiters with TERM_CHANGED; a group of
one settled at once; each deadline ``max_wait_ack_time_ms`` after the wait,
the push round asked for once a loop turn; the pusher's fields read at their
slots or through its attributes."""

from __future__ import annotations

import gc
from types import SimpleNamespace

import pytest

from rmq._fast import compiled_or_none
from rmq.dledger import pusher as pusher_mod
from rmq.dledger.commit_log import _put_status
from rmq.dledger.entry import Entry
from rmq.dledger.member_state import Role
from rmq.dledger.protocol import Code
from rmq.dledger.pusher import AckGroup, EntryPusher, _now_ms
from rmq.store.results import PutMessageStatus

pytestmark = pytest.mark.timeout(60)
F = compiled_or_none("dledger_frames")
if F is not None:  # (as rmq.dledger.pusher binds it, also when the twins run there)
    F.bind_acked(pusher_mod._Acked, Role.LEADER, Code.TERM_CHANGED, EntryPusher, AckGroup)
WAITS = [pusher_mod._wait_quorum_then] + ([F.wait_quorum_then] if F is not None else [])
MAX_WAIT = 2500


class _Loop:
    """The pusher's loop: what is called soon, recorded; futures made."""

    def __init__(self) -> None:
        self.soon: list = []

    def call_soon(self, fn) -> None:
        self.soon.append(fn)

    def create_future(self) -> _Future:
        return _Future()


class _Future:
    def __init__(self) -> None:
        self.result: list = []

    def done(self) -> bool:
        return bool(self.result)

    def set_result(self, value) -> None:
        self.result.append(value)


# an ``EntryPusher`` whose fields are attributes, not slots (the compiled
# wait reads them through the attribute path): its methods on a plain class
_PlainPusher = type("_PlainPusher", (), {
    name: EntryPusher.__dict__[name]
    for name in ("__init__", "wait_quorum", "_new_group", "_appended_more", "_fail_waiters",
                 "_check_quorum", "_marks", "_push_round")})


def _pusher(pusher_type, peers: tuple[str, ...]):
    commits: list = []
    ms = SimpleNamespace(group="g", self_id="n0", peer_map={p: p for p in peers}, curr_term=3,
                         role=Role.LEADER, others=lambda: [p for p in peers if p != "n0"])
    store = SimpleNamespace(ledger_end_index=40, committed_index=0,
                            update_committed_index=lambda term, index: commits.append(
                                (term, index)) or setattr(store, "committed_index", index))
    pusher = pusher_type(SimpleNamespace(max_wait_ack_time_ms=MAX_WAIT), ms, store, None, [])
    pusher.loop = _Loop()
    return pusher, commits


class _Run:
    """Waits on one pusher, each step's groups and callbacks recorded."""

    def __init__(self, wait, pusher) -> None:
        self.wait = wait
        self.pusher = pusher
        self.told: list = []
        self.labels: dict[int, str] = {}
        self.seen: set[int] = set()
        self.groups: list[AckGroup] = []

    def outcome(self, name: str):
        def outcome(code):
            return name, code
        self.labels[id(outcome)] = name
        return outcome

    def then(self, name: str):
        def then(value) -> None:
            self.told.append((name, value))
        self.labels[id(then)] = name
        return then

    def step(self, outcome, first: Entry, last: Entry, name: str) -> tuple:
        """The wait of a lane's read of ``first``..``last``, told to ``name``."""
        return self._timed(self.wait, self.pusher, outcome, first, last, self.then(name))

    def put(self, outcome, entry: Entry) -> tuple:
        """A put's wait of ``entry``, by a future (``EntryPusher.wait_quorum``)."""
        return self._timed(self.pusher.wait_quorum, entry, entry.index, outcome)

    def _timed(self, fn, *args) -> tuple:
        before = _now_ms()
        fn(*args)
        after = _now_ms()
        for g in self.pusher.waiters:  # each new group's deadline: from its wait
            if id(g) not in self.seen:
                self.seen.add(id(g))
                self.groups.append(g)
                assert before + MAX_WAIT <= g.deadline <= after + MAX_WAIT
        return self.state()

    def state(self) -> tuple:
        p = self.pusher
        return ([(type(g).__name__, g.term, g.first, g.last, g.entry.index, self.labels[id(g.outcome)],
                  [self.labels[id(t)] for t in g.then or ()], g.settled,
                  None if g._future is None else list(g._future.result), g is p._open)
                 for g in p.waiters], p._open is None, list(self.told), len(p.loop.soon),
                all(fn == p._push_round for fn in p.loop.soon), p._push_soon)


def _entries(term: int) -> list[Entry]:
    return [Entry(index=i, term=term) for i in range(40)]


def _waits(wait, pusher_type) -> list:
    """The steps of a leader with two followers."""
    pusher, _ = _pusher(pusher_type, ("n0", "n1", "n2"))
    r = _Run(wait, pusher)
    e, e4 = _entries(3), _entries(4)
    o1, o2 = r.outcome("o1"), r.outcome("o2")
    got = [r.step(o1, e[1], e[3], "a"),  # a group
           r.step(o1, e[4], e[5], "b")]  # joined (the push round asked for once)
    pusher._open = None  # a push (``push_from``), its round done
    pusher._push_soon = False
    got.append(r.step(o1, e[6], e[6], "c"))  # a new group, the round asked for again
    got.append(r.step(o2, e[7], e[8], "d"))  # another outcome: another group
    pusher._open.settled = True
    got.append(r.step(o2, e[9], e[9], "e"))  # the open group settled: another
    got.append(r.step(o2, e[9], e[9], "f"))  # not past the open group's last: another
    pusher._open = None  # a push
    r.put(o2, e[10])  # a put's group, waited on by a future
    got.append(r.step(o2, e[11], e[12], "g"))  # joined by a lane's read
    got.append(r.step(o2, e4[13], e4[14], "h"))  # term 4: term 3's groups failed
    got.append(r.step(o2, e4[15], e4[15], "i"))  # joined
    assert all(type(g) is AckGroup and gc.is_tracked(g) for g in r.groups)
    return got


@pytest.mark.parametrize("pusher_type", [EntryPusher, _PlainPusher])
@pytest.mark.parametrize("wait", WAITS)
def test_the_compiled_wait_leaves_the_groups_of_its_twin(wait, pusher_type):
    got = _waits(wait, pusher_type)
    assert got == _waits(pusher_mod._wait_quorum_then, EntryPusher)
    groups, _, told, soon, rounds, push_soon = got[1]
    assert [g[2:7] for g in groups] == [(1, 5, 3, "o1", ["a", "b"])] and soon == 1 and rounds
    assert [g[2:4] for g in got[2][0]] == [(1, 5), (6, 6)] and got[2][3] == 2
    assert [g[2:4] for g in got[5][0]] == [(1, 5), (6, 6), (7, 8), (9, 9), (9, 9)]
    assert got[4][0][2][7] and not got[4][0][3][7]  # (the settled group left as it was)
    assert got[6][0][-1][2:] == (10, 12, 10, "o2", ["g"], False, [], True)
    groups, is_none, told, soon, rounds, push_soon = got[8]
    # the waiters of term 3 failed (the settled one not told again), the new
    # group the only one waiting, and open
    assert [g[1:4] + g[6:] for g in groups] == [(4, 13, 15, ["h", "i"], False, None, True)]
    assert told == [(n, ("o1" if n in "abc" else "o2", Code.TERM_CHANGED))
                    for n in ("a", "b", "c", "e", "f", "g")]
    assert got[7][0][0][8] is None and soon == 2 and push_soon


def _alone(wait, pusher_type) -> list:
    """A group of one: each wait settled at once (the leader's own log is
    the quorum), with the put statuses of the commit log."""
    pusher, commits = _pusher(pusher_type, ("n0",))
    r = _Run(wait, pusher)
    r.labels[id(_put_status)] = "put"
    e = _entries(3)
    got = [r.step(_put_status, e[1], e[2], "a"), r.step(_put_status, e[3], e[3], "b")]
    return got + [commits, pusher.store.committed_index]


@pytest.mark.parametrize("pusher_type", [EntryPusher, _PlainPusher])
@pytest.mark.parametrize("wait", WAITS)
def test_a_group_of_one_settles_its_waits_at_once_as_the_twin(wait, pusher_type):
    got = _alone(wait, pusher_type)
    assert got == _alone(pusher_mod._wait_quorum_then, EntryPusher)
    assert got[1][:2] == ([], True) and got[1][2] == [("a", PutMessageStatus.PUT_OK),
                                                      ("b", PutMessageStatus.PUT_OK)]
    assert got[1][3] == 0 and got[2:] == [[(3, 40)], 40]


@pytest.mark.parametrize("code", [None, Code.WAIT_QUORUM_ACK_TIMEOUT, Code.TERM_CHANGED,
                                  Code.NOT_LEADER, Code.LEADER_PENDING_FULL, 12345])
def test_put_status_is_the_status_of_each_code(code):
    """``_put_status`` (a lookup): PUT_OK for a held quorum, 4.9.8's status
    for DLedger's codes, UNKNOWN_ERROR for any other."""
    want = {None: PutMessageStatus.PUT_OK,
            Code.WAIT_QUORUM_ACK_TIMEOUT: PutMessageStatus.OS_PAGECACHE_BUSY,
            Code.LEADER_PENDING_FULL: PutMessageStatus.OS_PAGECACHE_BUSY,
            Code.NOT_LEADER: PutMessageStatus.SERVICE_NOT_AVAILABLE}
    assert _put_status(code) is want.get(code, PutMessageStatus.UNKNOWN_ERROR)
    assert _put_status(None if code is None else int(code)) is _put_status(code)
