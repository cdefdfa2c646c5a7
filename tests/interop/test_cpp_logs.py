"""The C++ client log classifier: what fails a scenario and what does not."""

from __future__ import annotations

from datetime import datetime, timedelta

from tests.interop.cpp_logs import LogCheck, lines_before, problems


def write_log(home, lines: list[str]) -> None:
    path = home / "logs" / "rocketmq-cpp"
    path.mkdir(parents=True)
    (path / "123_rocketmq-cpp.log.0").write_text("\n".join(lines) + "\n")


def stamp(when: datetime) -> str:
    return when.strftime("%Y-%b-%d %H:%M:%S.%f")


NOW = datetime(2026, 11, 21, 7, 0, 0)


def test_protocol_errors_fail_and_benign_lines_do_not(tmp_path):
    t = stamp(NOW)
    write_log(tmp_path, [
        f"[{t}](info):sendheartbeat to broker:127.0.0.1:10911 success[sendHearbeat:268]",
        f"[{t}](error):TcpRemotingClient::stopAllTcpTransportThread End, m_tcpTable:0[x:1]",
        f"[{t}](warning):sendheartbeat brokeradd is empty[sendHeartbeatToAllBroker:703]",
        f"[{t}](error):parse json error:bad, value isArray:0, isObject:0[decode:1]",
        f"[{t}](warning):get error response:1 of heartbeat to addr:127.0.0.1:1[x:2]",
        f"[{t}](warning):The topic:[%RETRY%g] not exist[update:490]",
    ])
    found = problems(tmp_path)
    assert len(found) == 2
    assert "parse json error" in found[0] and "get error response" in found[1]


def test_a_problem_comes_with_the_lines_logged_before_it(tmp_path):
    t = stamp(NOW)
    lines = [f"[{t}](info):step {i}[x:{i}]" for i in range(10)]
    lines.append(f"[{t}](error):parse json error:bad[decode:1]")
    write_log(tmp_path, lines)
    (found,) = problems(tmp_path)
    assert lines_before(tmp_path, found, count=3) == lines[7:10]
    assert lines_before(tmp_path, found.replace("json", "xml")) == []


def test_timeouts_fail_outside_restart_windows_only(tmp_path):
    inside, outside = NOW + timedelta(seconds=5), NOW + timedelta(seconds=60)
    write_log(tmp_path, [
        f"[{stamp(inside)}](warning):waitResponse of code:11 with opaque:7 timeout[w:1]",
        f"[{stamp(outside)}](warning):waitResponse of code:11 with opaque:9 timeout[w:1]",
    ])
    assert len(problems(tmp_path)) == 2
    window = LogCheck(windows=[(NOW, NOW + timedelta(seconds=2))], grace_s=10)
    found = problems(tmp_path, window)
    assert len(found) == 1 and "opaque:9" in found[0]


def test_expected_errors_and_shutdown_races(tmp_path):
    t = stamp(NOW)
    write_log(tmp_path, [
        f"[{t}](error):msg: No route info of this topic: T1,error:-1[send:115]",
        f"[{t}](error):msg: no consumer for this group, g,error:1[findConsumerIds:1029]",
        f"[{t}](info):DefaultMQPushConsumer shutdown[shutdown:383]",
        f"[{t}](error):msg: no consumer for this group, g,error:1[findConsumerIds:1029]",
    ])
    found = problems(tmp_path, LogCheck(expected=("No route info of this topic: T1",)))
    assert len(found) == 1 and "no consumer for this group" in found[0]


def test_recovery_extends_the_last_restart_window(tmp_path):
    """A timeout logged while the clients are still recovering from a restart
    (after the broker is back, before the test saw them work again) is
    accepted once the test marks the recovery; one after recovery + grace is not."""
    from tests.interop.harness import Cluster

    cluster = Cluster(tmp_path / "cluster")
    cluster.recovered()  # no restart yet: nothing to extend
    assert cluster.restarts == []
    began = datetime.now() - timedelta(seconds=120)
    cluster.restarts.append((began, began + timedelta(seconds=2)))
    late, after = began + timedelta(seconds=70), datetime.now() + timedelta(seconds=50)
    write_log(tmp_path, [
        f"[{stamp(began - timedelta(seconds=30))}](info):MQClientFactory start[start:68]",
        f"[{stamp(late)}](error):GetTransport of:127.0.0.1:1 get timed_mutex timeout[C:297]",
        f"[{stamp(after)}](error):GetTransport of:127.0.0.1:1 get timed_mutex timeout[C:298]",
    ])
    assert len(problems(tmp_path, LogCheck(windows=list(cluster.restarts)))) == 2
    cluster.recovered()
    assert cluster.restarts[0][0] == began and cluster.restarts[0][1] >= late
    found = problems(tmp_path, LogCheck(windows=list(cluster.restarts)))
    assert len(found) == 1 and "C:298" in found[0]


def test_transport_lock_race_is_accepted_at_start_up_only(tmp_path):
    """Two threads opening the first broker connection together: the loser logs a
    lock timeout at start-up (seen in CI 11 ms into a push consumer's life).  The
    same line later, outside any restart window, still fails the scenario."""
    early, late = NOW + timedelta(milliseconds=11), NOW + timedelta(seconds=60)
    write_log(tmp_path, [
        f"[{stamp(NOW)}](info):DefaultMQPushConsumer:g start[start:300]",
        f"[{stamp(early)}](error):GetTransport of:127.0.0.1:1 get timed_mutex timeout[C:297]",
        f"[{stamp(late)}](error):GetTransport of:127.0.0.1:1 get timed_mutex timeout[C:298]",
    ])
    found = problems(tmp_path)
    assert len(found) == 1 and "C:298" in found[0]
    assert found[0].startswith(f"{tmp_path.name}/123_rocketmq-cpp.log.0: ")
    assert len(problems(tmp_path, LogCheck(startup_s=0.001))) == 2


def test_a_start_up_race_and_the_request_it_failed(tmp_path):
    """Two client threads opening the first connection at once: the loser's
    lock timeout and what its consumer-list request logs right after are
    accepted at start-up; the same request failing on its own, or long after
    the race, is not."""
    t0, t1 = stamp(NOW), stamp(NOW + timedelta(milliseconds=1))
    later = stamp(NOW + timedelta(seconds=3))
    race = [
        f"[{t0}](info):MQClientFactory start[start:68]",
        f"[{t0}](error):GetTransport of:127.0.0.1:1 get timed_mutex timeout[CreateTransport:297]",
        f"[{t1}](error):msg: response is null,error:-1,in file <MQClientAPIImpl.cpp> "
        "line:762[findConsumerIds:1029]",
        f"[{t1}](error):msg: doRebalance the cidAll is empty,error:-1,in file "
        "<Rebalance.cpp> line:104[doRebalance:139]",
    ]
    write_log(tmp_path / "race", race)
    assert problems(tmp_path / "race") == []
    write_log(tmp_path / "alone", [race[0]] + race[2:])
    assert len(problems(tmp_path / "alone")) == 2
    write_log(tmp_path / "late", race[:2] + [line.replace(t1, later) for line in race[2:]])
    assert len(problems(tmp_path / "late")) == 2


def test_a_first_consumer_list_query_unanswered_until_its_timeout(tmp_path):
    """The first rebalance's consumer-list query, sent as the client opens the
    broker connection, unanswered for its 5 s (seen once in CI): accepted with
    the empty list it leads to, at start-up only."""
    def log(after_s: float) -> list[str]:
        t = stamp(NOW + timedelta(seconds=after_s))
        t1 = stamp(NOW + timedelta(seconds=after_s, microseconds=10))
        return [
            f"[{stamp(NOW)}](info):MQClientFactory start[start:68]",
            f"[{t}](error):msg: response is null,error:-1,in file <MQClientAPIImpl.cpp> "
            "line:762[findConsumerIds:1029]",
            f"[{t1}](error):msg: doRebalance the cidAll is empty,error:-1,in file "
            "<Rebalance.cpp> line:104[doRebalance:139]",
        ]

    write_log(tmp_path / "first", log(5.1))
    assert problems(tmp_path / "first") == []
    write_log(tmp_path / "later", log(20.0))
    assert len(problems(tmp_path / "later")) == 2
    write_log(tmp_path / "at_once", log(0.5))
    assert len(problems(tmp_path / "at_once")) == 2
    write_log(tmp_path / "pull", [line.replace("[findConsumerIds:1029]", "[pull:1]")
                                  for line in log(5.1)])
    assert len(problems(tmp_path / "pull")) == 2


def test_a_sync_pull_that_lost_the_start_up_race(tmp_path):
    """A pull consumer's first sync pull losing the race for the broker's
    first connection has no result, which the client logs and reports as
    BROKER_TIMEOUT (the driver pulls again): accepted right after the race,
    a failure on its own."""
    t0, t1 = stamp(NOW), stamp(NOW + timedelta(milliseconds=1))
    race = [
        f"[{t0}](info):DefaultMQPullConsumer:pull_g start[start:71]",
        f"[{t0}](error):GetTransport of:127.0.0.1:1 get timed_mutex timeout[CreateTransport:297]",
        f"[{t1}](error):msg: The pullResult NULL ofMessageQueue [topic=TopicPull, "
        "brokerName=broker-a, queueId=0],error:-1,in file <PullAPIWrapper.cpp> "
        "line:61[pullSyncImpl:253]",
    ]
    write_log(tmp_path / "race", race)
    assert problems(tmp_path / "race") == []
    write_log(tmp_path / "alone", [race[0], race[2]])
    assert len(problems(tmp_path / "alone")) == 1
