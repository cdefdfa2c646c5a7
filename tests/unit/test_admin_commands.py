"""rmq-admin's command table: every mqadmin 4.9.8 command name is there, each
answers -h, and a bad argument is one line on stderr with exit status 2."""

from __future__ import annotations

import contextlib
import io

import pytest

from rmq.tools.admin import COMMANDS, build_parser

# once: the rmq-admin command line, no compiled/twin pair of its own
pytestmark = pytest.mark.once

# MQAdminStartup.initCommand of 4.9.8, in its order
MQADMIN_COMMANDS = (
    "updateTopic", "deleteTopic", "updateSubGroup", "deleteSubGroup", "updateBrokerConfig",
    "updateTopicPerm", "topicRoute", "topicStatus", "topicClusterList", "brokerStatus",
    "queryMsgById", "queryMsgByKey", "queryMsgByUniqueKey", "queryMsgByOffset",
    "queryMsgTraceById", "printMsg", "printMsgByQueue", "sendMsgStatus", "brokerConsumeStats",
    "producerConnection", "consumerConnection", "consumerProgress", "consumerStatus",
    "cloneGroupOffset", "producer", "clusterList", "topicList", "updateKvConfig",
    "deleteKvConfig", "wipeWritePerm", "addWritePerm", "resetOffsetByTime",
    "skipAccumulatedMessage", "updateOrderConf", "cleanExpiredCQ", "deleteExpiredCommitLog",
    "cleanUnusedTopic", "startMonitoring", "statsAll", "allocateMQ", "checkMsgSendRT",
    "clusterRT", "getNamesrvConfig", "updateNamesrvConfig", "getBrokerConfig",
    "getConsumerConfig", "queryCq", "sendMessage", "consumeMessage", "updateAclConfig",
    "deleteAccessConfig", "clusterAclConfigVersion", "updateGlobalWhiteAddr",
    "exportMetadata", "exportConfigs", "exportMetrics")


def test_every_mqadmin_command_is_registered():
    assert len(MQADMIN_COMMANDS) == 56
    missing = [n for n in MQADMIN_COMMANDS if n not in COMMANDS]
    assert missing == []


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help(name):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as info:
        build_parser().parse_args([name, "-h"])
    assert info.value.code == 0
    text = out.getvalue()
    assert text.startswith(f"usage: rmq-admin {name} ") and "--namesrvAddr" in text


@pytest.mark.parametrize("argv,needle", [
    (["updateTopicPerm", "-t", "T", "-c", "C"], "-p/--perm"),
    (["updateTopicPerm", "-t", "T", "-c", "C", "-p", "7"], "perm must be 2 (W), 4 (R) or 6 (RW)"),
    (["cleanUnusedTopic", "-b", "a:1", "-c", "C"], "not allowed with argument"),
    (["updateOrderConf", "-t", "T", "-m", "post"], "invalid choice"),
    (["checkMsgSendRT", "-t", "T", "-a", "zero"], "must be a whole number >= 1"),
    (["queryCq", "-t", "T", "-q", "x", "-i", "0"], "invalid int value"),
    (["exportConfigs"], "-c/--clusterName"),
])
def test_bad_argument_is_one_line(argv, needle):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as info:
        build_parser().parse_args(argv)
    assert info.value.code == 2
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"rmq-admin {argv[0]}: ") and needle in lines[0]


def test_cluster_list_timer_progress_is_5_3_3s_layout():
    from rmq.tools.admin import timer_progress

    rt = {"timerReadBehind": "3", "timerOffsetBehind": "120", "timerCongestNum": "25000",
          "timerEnqueueTps": "812.5", "timerDequeueTps": "40.0"}
    assert timer_progress(rt) == "3-120(2.5w, 812.5, 40.0)"
    assert timer_progress({}) == "0-0(0.0w, 0.0, 0.0)"  # a 4.9.8 broker has no timer keys
    assert timer_progress({"timerEnqueueTps": "x"}) == "0-0(0.0w, 0.0, 0.0)"


def test_dashboard_reads_inflight_rows_of_a_prometheus_page():
    from rmq.tools.dashboard.service import inflight_rows

    page = ('# TYPE rocketmq_consumer_inflight_messages gauge\n'
            'rocketmq_consumer_inflight_messages{cluster="c",consumer_group="g1",topic="T"} 3.0\n'
            'rocketmq_consumer_inflight_messages{consumer_group="g\\"2",topic="U"} 1\n'
            'rocketmq_consumer_lag_messages{consumer_group="g1",topic="T"} 9.0\n'
            'rocketmq_consumer_inflight_messages{topic="V"} 4\n')
    assert inflight_rows(page) == [("g1", 3), ('g\\"2', 1)]
