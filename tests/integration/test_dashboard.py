"""rmq-dashboard in a real browser: headless Chromium (Debian's chromium and
chromium-driver) driven by Selenium against a real rmq-dashboard process, a
real name server and broker, and the rmq client producing and consuming.

Set RMQ_DASHBOARD_SCREENSHOTS=DIR to keep a PNG of each page (the ones in
docs/images/ were taken that way)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import pytest_asyncio
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

from rmq.client import Message, Producer
from rmq.testing.messaging import running_cluster
from rmq.testing.procs import RmqProcess, free_port, run_cli
from tests.integration.admin_cli import recording_consumer

# once: the web console on top of rmq.client, no compiled/twin pair of its own
pytestmark = [pytest.mark.once, pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180)]

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
SHOTS = os.environ.get("RMQ_DASHBOARD_SCREENSHOTS")


def start_dashboard(tmp: Path, namesrv: str, *extra: str) -> tuple[RmqProcess, str]:
    port = free_port()
    proc = RmqProcess("rmq.tools.dashboard.app",
                      ["--namesrv", namesrv, "--host", "127.0.0.1", "--port", str(port),
                       "--sample-interval", "1", *extra], tmp / f"dashboard-{port}.out")
    proc.start(wait_for_port=port)
    return proc, f"http://127.0.0.1:{port}"


def chrome(tmp: Path) -> webdriver.Chrome:
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must not look for drivers online
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-quic", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--window-size=1400,1100",
                f"--user-data-dir={tmp / 'chromium'}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    return driver


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dashboard")
    async with running_cluster(tmp) as cluster:
        proc, url = start_dashboard(tmp, cluster.namesrv_addr)
        driver = chrome(tmp)
        try:
            yield cluster, url, driver
        finally:
            driver.quit()
            proc.stop()


def wait(driver, condition, timeout: float = 20):
    return WebDriverWait(driver, timeout, poll_frequency=0.2,
                         ignored_exceptions=(StaleElementReferenceException,)).until(condition)


def open_page(driver, url: str, page: str) -> None:
    driver.get(f"{url}/?at={time.monotonic_ns()}#{page}")  # a new load, even from the same page
    wait(driver, EC.visibility_of_element_located((By.ID, f"page-{page}")))


def shot(driver, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(SHOTS) / f"dashboard-{name}.png"))


def text_of(driver, element_id: str) -> str:
    return driver.find_element(By.ID, element_id).text


def wait_text(driver, element_id: str, pattern: str, timeout: float = 20) -> str:
    """Until the element's text matches ``pattern`` (re.search); its text."""
    found = {}

    def match(d):
        try:
            t = d.find_element(By.ID, element_id).text
        except Exception:  # noqa: BLE001 - not rendered yet
            return False
        found["t"] = t
        return re.search(pattern, t) is not None
    try:
        wait(driver, match, timeout)
    except TimeoutException:
        raise AssertionError(f"#{element_id} never matched {pattern!r}: {found.get('t')!r}; "
                             f"error banner: {driver.find_element(By.ID, 'error').text!r}") from None
    return found["t"]


def fill(driver, element_id: str, value: str) -> None:
    box = driver.find_element(By.ID, element_id)
    box.clear()
    box.send_keys(value)


def row_button(driver, table_id: str, first_cell: str, button_class: str) -> None:
    """Click the button of the row whose first cell is ``first_cell``."""
    def find(d):
        for row in d.find_elements(By.CSS_SELECTOR, f"#{table_id} tbody tr"):
            cells = row.find_elements(By.TAG_NAME, "td")
            if cells and cells[0].text == first_cell:
                return row.find_element(By.CLASS_NAME, button_class)
        return False
    wait(driver, find).click()


async def test_cluster_page_shows_the_broker(env):
    cluster, url, driver = env
    open_page(driver, url, "cluster")
    table = wait_text(driver, "cluster-table", r"broker-a")
    assert "DefaultCluster" in table and "MASTER" in table and cluster.addr in table
    assert re.search(r"V4_9_8", table), table
    shot(driver, "cluster")


async def test_topic_created_in_the_ui_is_listed_by_rmq_admin(env):
    cluster, url, driver = env
    open_page(driver, url, "topics")
    wait(driver, lambda d: Select(d.find_element(By.ID, "new-topic-cluster")).options)
    fill(driver, "new-topic-name", "DashTopic")
    fill(driver, "new-topic-write", "4")
    fill(driver, "new-topic-read", "4")
    Select(driver.find_element(By.ID, "new-topic-cluster")).select_by_value("DefaultCluster")
    driver.find_element(By.ID, "topic-create-submit").click()
    wait_text(driver, "notice", "topic DashTopic created")
    wait_text(driver, "topics-table", r"DashTopic")
    listed = run_cli("rmq.tools.admin", ["topicList", "-n", cluster.namesrv_addr])
    assert listed.returncode == 0, listed.stderr
    assert "DashTopic" in listed.stdout.split()
    row_button(driver, "topics-table", "DashTopic", "topic-status")
    queues = wait_text(driver, "topic-queues", r"broker-a")
    assert len(driver.find_elements(By.CSS_SELECTOR, "#topic-queues tbody tr")) == 4, queues
    shot(driver, "topics")
    # a test message sent from the page
    row_button(driver, "topics-table", "DashTopic", "topic-send")
    fill(driver, "send-key", "ui-key")
    fill(driver, "send-body", "sent from the console")
    driver.find_element(By.ID, "send-submit").click()
    assert "SEND_OK" in wait_text(driver, "send-result", "SEND_OK")
    # deleted from the page: gone from rmq-admin's list too
    row_button(driver, "topics-table", "DashTopic", "topic-delete")
    driver.find_element(By.ID, "delete-confirm").click()
    wait_text(driver, "notice", "topic DashTopic deleted")
    listed = run_cli("rmq.tools.admin", ["topicList", "-n", cluster.namesrv_addr])
    assert listed.returncode == 0 and "DashTopic" not in listed.stdout.split()


async def test_a_broker_error_is_shown(env):
    _, url, driver = env
    open_page(driver, url, "topics")
    wait(driver, lambda d: Select(d.find_element(By.ID, "new-topic-cluster")).options)
    fill(driver, "new-topic-name", "TBW102")  # the broker refuses a system topic
    driver.find_element(By.ID, "topic-create-submit").click()
    error = wait_text(driver, "error", r"conflict with system topic")
    assert "CODE: 1" in error, error


async def test_lag_shows_after_producing_and_drops_to_zero_after_consuming(env):
    cluster, url, driver = env
    topic, group = "DashLag", "cgDashLag"
    await cluster.create_topic(topic, queues=2)
    async with Producer("pgDashLag", client_config=cluster.client_config("dash-lag")) as p:
        for i in range(3):
            await p.send(Message(topic, f"first {i}".encode()))
        async with recording_consumer(cluster, group, topic, "*", 3):
            pass  # the group's offsets now stand at the end
        for i in range(7):
            await p.send(Message(topic, f"backlog {i}".encode()))
    open_page(driver, url, "groups")
    row_button(driver, "groups-table", group, "group-detail")
    assert wait_text(driver, "group-lag", r"^7$") == "7"
    progress = text_of(driver, "group-progress")
    assert topic in progress
    shot(driver, "groups")
    async with recording_consumer(cluster, group, topic, "*", 7):
        pass
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        driver.find_element(By.ID, "group-refresh").click()
        try:
            wait_text(driver, "group-lag", r"^0$", 2)
            break
        except AssertionError:
            continue
    assert text_of(driver, "group-lag") == "0"


async def test_skip_accumulated_messages_from_the_page(env):
    cluster, url, driver = env
    topic, group = "DashSkip", "cgDashSkip"
    await cluster.create_topic(topic, queues=1)
    async with Producer("pgDashSkip", client_config=cluster.client_config("dash-skip")) as p:
        await p.send(Message(topic, b"one"))
        async with recording_consumer(cluster, group, topic, "*", 1):
            pass
        for _ in range(4):
            await p.send(Message(topic, b"more"))
    open_page(driver, url, "groups")
    row_button(driver, "groups-table", group, "group-detail")
    wait_text(driver, "group-lag", r"^4$")
    assert Select(driver.find_element(By.ID, "reset-topic")).first_selected_option.text == topic
    driver.find_element(By.ID, "skip-submit").click()
    wait_text(driver, "notice", "backlog of cgDashSkip on DashSkip skipped")
    wait_text(driver, "group-lag", r"^0$")
    # and back: reset to an hour ago puts all five messages before the group again
    driver.execute_script("document.getElementById('reset-time').value = arguments[0];",
                          time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 3600)))
    driver.find_element(By.ID, "reset-submit").click()
    wait_text(driver, "notice", "offsets of cgDashSkip on DashSkip reset .*no consumer online")
    wait_text(driver, "group-lag", r"^5$")


async def test_message_found_by_key_by_id_and_by_time_shows_its_body(env):
    cluster, url, driver = env
    topic = "DashMsg"
    await cluster.create_topic(topic, queues=2)
    async with Producer("pgDashMsg", client_config=cluster.client_config("dash-msg")) as p:
        await p.send(Message(topic, b"noise", keys="other"))
        sent = await p.send(Message(topic, b"hello from the key search", tags="TagA",
                                    keys="order-42"))
        open_page(driver, url, "messages")
        fill(driver, "msg-key-topic", topic)
        fill(driver, "msg-key", "order-42")
        driver.find_element(By.ID, "msg-key-submit").click()
        row_button(driver, "msg-results", sent.msg_id, "msg-detail")
        assert wait_text(driver, "msg-body", "hello") == "hello from the key search"
        assert "TagA" in text_of(driver, "msg-properties")
        shot(driver, "messages")
        # by the client's message id
        fill(driver, "msg-id-topic", topic)
        fill(driver, "msg-id", sent.msg_id)
        driver.find_element(By.ID, "msg-id-submit").click()
        row_button(driver, "msg-results", sent.msg_id, "msg-detail")
        assert wait_text(driver, "msg-body", "hello") == "hello from the key search"
        # by topic and time (the page's default range: the last hour)
        fill(driver, "msg-topic", topic)
        driver.find_element(By.ID, "msg-time-submit").click()
        results = wait_text(driver, "msg-results", re.escape(sent.msg_id))
        assert len(driver.find_elements(By.CSS_SELECTOR, "#msg-results tbody tr")) == 2, results
        # the producer is connected while the page asks
        open_page(driver, url, "producers")
        fill(driver, "prod-topic", topic)
        fill(driver, "prod-group", "pgDashMsg")
        driver.find_element(By.ID, "prod-submit").click()
        assert "PYTHON" in wait_text(driver, "prod-table", "127.0.0.1").upper()


async def test_consume_directly_from_the_message_page(env):
    """A message handed to an online consumer's listener again, from its detail:
    the browser runs in a thread so the consumer in this process can answer."""
    cluster, url, driver = env
    topic, group = "DashDirect", "cgDashDirect"
    await cluster.create_topic(topic, queues=1)
    async with Producer("pgDashDirect", client_config=cluster.client_config("dash-d")) as p:
        sent = await p.send(Message(topic, b"consume me again", keys="direct-1"))
    async with recording_consumer(cluster, group, topic, "*", 1) as (consumer, received):
        def ui() -> str:
            open_page(driver, url, "messages")
            fill(driver, "msg-key-topic", topic)
            fill(driver, "msg-key", "direct-1")
            driver.find_element(By.ID, "msg-key-submit").click()
            row_button(driver, "msg-results", sent.msg_id, "msg-detail")
            fill(driver, "direct-group", group)
            fill(driver, "direct-client", consumer.instance.client_id)
            driver.find_element(By.ID, "direct-submit").click()
            return wait_text(driver, "direct-result", "consumeResult", 30)
        result = json.loads(await asyncio.to_thread(ui))
        assert result["consumeResult"] == "CR_SUCCESS", result
        assert [m.body for m in received] == [b"consume me again"] * 2


async def test_live_charts_draw_tps_and_lag(env):
    _, url, driver = env
    open_page(driver, url, "live")
    legend = wait_text(driver, "legend-tps", r"broker-a put", 30)
    assert "broker-a get" in legend
    wait_text(driver, "legend-lag", r"cgDashLag", 30)
    painted = driver.execute_script(
        "const c = document.getElementById('chart-tps');"
        "const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        "let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return n;")
    assert painted > 1000
    time.sleep(2.5)  # two more samples drawn
    shot(driver, "live")


def _post(url: str, path: str, body: dict, cookie: str | None = None) -> tuple[int, dict, str]:
    req = urllib.request.Request(f"{url}{path}", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          **({"Cookie": cookie} if cookie else {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read()), r.headers.get("Set-Cookie", "")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), ""


async def test_login_protects_write_actions(env, tmp_path):
    cluster, _, driver = env
    users = tmp_path / "users.properties"
    users.write_text("admin=secret,1\nviewer=look\n")
    proc, url = start_dashboard(tmp_path, cluster.namesrv_addr, "--login-required",
                                "--users", str(users))
    try:
        create = {"topic": "DashLocked", "cluster": "DefaultCluster"}
        status, body, _ = _post(url, "/api/topics", create)
        assert status == 401 and "login required" in body["error"]
        status, _, cookie = _post(url, "/api/login", {"user": "viewer", "password": "look"})
        assert status == 200
        status, body, _ = _post(url, "/api/topics", create, cookie.split(";")[0])
        assert status == 401  # not an admin
        status, body, _ = _post(url, "/api/login", {"user": "admin", "password": "wrong"})
        assert status == 401 and "wrong user name or password" in body["error"]
        # in the browser: refused, then logged in, then done
        open_page(driver, url, "topics")
        wait(driver, lambda d: Select(d.find_element(By.ID, "new-topic-cluster")).options)
        fill(driver, "new-topic-name", "DashLocked")
        driver.find_element(By.ID, "topic-create-submit").click()
        wait_text(driver, "error", "login required")
        fill(driver, "login-user", "admin")
        fill(driver, "login-password", "secret")
        driver.find_element(By.ID, "login-submit").click()
        wait_text(driver, "whoami", r"admin \(admin\)")
        driver.find_element(By.ID, "topic-create-submit").click()
        wait_text(driver, "notice", "topic DashLocked created")
    finally:
        proc.stop()


async def test_bad_users_file_is_one_line_and_exit_1(env, tmp_path):
    cluster, _, _ = env
    out = run_cli("rmq.tools.dashboard.app", ["--namesrv", cluster.namesrv_addr,
                                              "--login-required", "--port", "0"])
    assert out.returncode == 1
    assert out.stderr.strip() == \
        "rmq-dashboard: --login-required needs --users with at least one user"
