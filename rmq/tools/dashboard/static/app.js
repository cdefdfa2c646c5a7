// rmq dashboard: pages over the console's JSON API (/api/...). No framework, no CDN.
"use strict";

const $ = (sel) => document.querySelector(sel);
const state = { clusters: [], session: { loginRequired: false, admin: true }, page: "cluster" };

// ---- talking to the console ------------------------------------------------------
async function api(method, path, body) {
  const opts = { method, headers: {} };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const resp = await fetch(path, opts);
  let data = null;
  try { data = await resp.json(); } catch (e) { data = { error: `HTTP ${resp.status}` }; }
  if (!resp.ok) {
    throw new Error((data && data.error) || `HTTP ${resp.status}`);
  }
  return data;
}

function showError(err) {
  const box = $("#error");
  box.textContent = err.message || String(err);
  box.hidden = false;
}

function showNotice(text) {
  const box = $("#notice");
  box.textContent = text;
  box.hidden = false;
}

function clearBanners() {
  $("#error").hidden = true;
  $("#notice").hidden = true;
}

// every action: banners cleared first, any failure shown (never swallowed)
function guarded(fn) {
  return async (...args) => {
    clearBanners();
    try {
      await fn(...args);
    } catch (err) {
      showError(err);
    }
  };
}

// ---- rendering helpers ------------------------------------------------------------
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : String(c));
  }
  return node;
}

function fillTable(table, columns, rows, extra) {
  table.replaceChildren();
  const head = el("tr", {}, ...columns.map((c) => el("th", {}, c[1])));
  if (extra) head.append(el("th", {}, ""));
  table.append(el("thead", {}, head));
  const body = el("tbody");
  for (const row of rows) {
    const tr = el("tr", {}, ...columns.map((c) => {
      const v = c[2] ? c[2](row) : row[c[0]];
      return el("td", { class: typeof v === "number" ? "num" : "", "data-col": c[0] },
                v === null || v === undefined ? "" : v);
    }));
    if (extra) tr.append(el("td", {}, ...extra(row)));
    body.append(tr);
  }
  table.append(body);
}

const when = (ms) => (ms > 0 ? new Date(ms).toLocaleString() : "");
const pct = (x) => `${(x * 100).toFixed(1)}%`;
const localInput = (ms) => {
  const d = new Date(ms - new Date().getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 19);
};
const fromInput = (text) => (text ? new Date(text).getTime() : null);

// ---- session ------------------------------------------------------------------------
async function loadSession() {
  state.session = await api("GET", "/api/session");
  const s = state.session;
  $("#whoami").textContent = s.user ? `${s.user}${s.admin ? " (admin)" : ""}` :
    (s.loginRequired ? "read only: log in to change things" : "");
  $("#login-form").hidden = !s.loginRequired || !!s.user;
  $("#logout").hidden = !s.user;
}

$("#login-form").addEventListener("submit", guarded(async (ev) => {
  ev.preventDefault();
  await api("POST", "/api/login", { user: $("#login-user").value, password: $("#login-password").value });
  $("#login-password").value = "";
  await loadSession();
  showNotice("logged in");
}));
$("#logout").addEventListener("click", guarded(async () => {
  await api("POST", "/api/logout");
  await loadSession();
}));

// ---- cluster --------------------------------------------------------------------------
async function loadCluster() {
  const data = await api("GET", "/api/cluster");
  state.clusters = data.clusters;
  fillTable($("#cluster-table"), [
    ["cluster", "Cluster"], ["brokerName", "Broker"], ["brokerId", "Id"], ["role", "Role"],
    ["addr", "Address"], ["version", "Version"],
    ["putTps", "Put TPS", (r) => (r.putTps === undefined ? "" : r.putTps.toFixed(1))],
    ["getTps", "Get TPS", (r) => (r.getTps === undefined ? "" : r.getTps.toFixed(1))],
    ["putToday", "Put today"], ["getToday", "Get today"],
    ["diskRatio", "Disk used", (r) => (r.diskRatio === undefined ? "" : pct(r.diskRatio))],
    ["timerPending", "Timers pending"], ["timerBacklog", "Timer backlog"],
    ["timerBehind", "Timer lag (s)"],
    ["bootTimestamp", "Started", (r) => when(r.bootTimestamp)],
    ["error", "Error", (r) => r.error || ""],
  ], data.brokers);
}

// ---- topics ---------------------------------------------------------------------------
async function loadTopics() {
  if (!state.clusters.length) {
    state.clusters = (await api("GET", "/api/cluster")).clusters;
  }
  const select = $("#new-topic-cluster");
  const chosen = select.value;
  select.replaceChildren(...state.clusters.map((c) => el("option", { value: c }, c)));
  if (chosen) select.value = chosen;
  state.topics = await api("GET", "/api/topics");
  renderTopics();
}

function renderTopics() {
  const filter = $("#topic-filter").value.trim().toLowerCase();
  const all = $("#topic-show-system").checked;
  const rows = (state.topics || []).filter((t) =>
    (all || t.kind === "normal") && t.topic.toLowerCase().includes(filter));
  fillTable($("#topics-table"), [["topic", "Topic"], ["kind", "Kind"]], rows, (row) => [
    el("button", { class: "topic-status", onclick: guarded(() => showTopic(row.topic)) }, "Status"),
    " ",
    el("button", { class: "topic-send", onclick: () => showSendForm(row.topic) }, "Send"),
    " ",
    el("button", { class: "topic-delete", onclick: () => confirmDelete(row.topic) }, "Delete"),
  ]);
}

async function showTopic(topic) {
  const data = await api("GET", `/api/topics/${encodeURIComponent(topic)}`);
  const box = $("#topic-detail");
  const route = el("table");
  fillTable(route, [["brokerName", "Broker"], ["readQueueNums", "Read queues"],
    ["writeQueueNums", "Write queues"], ["perm", "Perm"]], data.route);
  const queues = el("table", { id: "topic-queues" });
  fillTable(queues, [["brokerName", "Broker"], ["queueId", "Queue"], ["minOffset", "Min offset"],
    ["maxOffset", "Max offset"], ["lastUpdateTimestamp", "Last update", (r) => when(r.lastUpdateTimestamp)]],
    data.queues);
  box.replaceChildren(el("h2", {}, `Topic ${topic}`), el("h2", {}, "Route"), route,
                      el("h2", {}, "Queues"), queues);
  box.hidden = false;
}

function showSendForm(topic) {
  const box = $("#topic-detail");
  const form = el("form", { id: "send-form" },
    el("h2", {}, `Send a message to ${topic}`),
    el("label", {}, "Tag ", el("input", { id: "send-tag" })), " ",
    el("label", {}, "Key ", el("input", { id: "send-key" })), " ",
    el("label", {}, "Body ", el("textarea", { id: "send-body", rows: "3", cols: "40" })), " ",
    el("button", { id: "send-submit", type: "submit" }, "Send"),
    el("pre", { id: "send-result", hidden: "" }));
  form.addEventListener("submit", guarded(async (ev) => {
    ev.preventDefault();
    const r = await api("POST", `/api/topics/${encodeURIComponent(topic)}/send`, {
      tag: $("#send-tag").value, key: $("#send-key").value, body: $("#send-body").value });
    const out = $("#send-result");
    out.textContent = `${r.sendStatus}\nmsgId: ${r.msgId}\noffsetMsgId: ${r.offsetMsgId}\n` +
      `queue: ${r.messageQueue.brokerName}:${r.messageQueue.queueId} offset ${r.queueOffset}`;
    out.hidden = false;
  }));
  box.replaceChildren(form);
  box.hidden = false;
}

function confirmDelete(topic) {
  const box = $("#topic-detail");
  const cluster = el("select", { id: "delete-cluster" },
    ...state.clusters.map((c) => el("option", { value: c }, c)));
  box.replaceChildren(el("h2", {}, `Delete topic ${topic}?`), el("label", {}, "Cluster ", cluster), " ",
    el("button", { id: "delete-confirm", onclick: guarded(async () => {
      await api("DELETE", `/api/topics/${encodeURIComponent(topic)}?cluster=${encodeURIComponent(cluster.value)}`);
      box.hidden = true;
      showNotice(`topic ${topic} deleted`);
      await loadTopics();
    }) }, "Delete"));
  box.hidden = false;
}

$("#topic-filter").addEventListener("input", renderTopics);
$("#topic-show-system").addEventListener("change", renderTopics);
$("#topic-create-form").addEventListener("submit", guarded(async (ev) => {
  ev.preventDefault();
  const topic = $("#new-topic-name").value.trim();
  await api("POST", "/api/topics", {
    topic, cluster: $("#new-topic-cluster").value,
    writeQueueNums: Number($("#new-topic-write").value),
    readQueueNums: Number($("#new-topic-read").value), perm: Number($("#new-topic-perm").value) });
  showNotice(`topic ${topic} created`);
  await loadTopics();
}));

// ---- consumer groups -------------------------------------------------------------------
async function loadGroups() {
  state.groups = await api("GET", "/api/groups");
  renderGroups();
}

function renderGroups() {
  const filter = $("#group-filter").value.trim().toLowerCase();
  const all = $("#group-show-system").checked;
  const rows = (state.groups || []).filter((g) =>
    (all || !g.system) && g.group.toLowerCase().includes(filter));
  fillTable($("#groups-table"), [["group", "Group"], ["connections", "Clients"],
    ["consumeType", "Type"], ["messageModel", "Model"],
    ["lag", "Lag", (r) => (r.lag === null ? "" : r.lag)],
    ["inflight", "In flight", (r) => (r.inflight === null || r.inflight === undefined ? "" : r.inflight)]],
    rows, (row) => [
    el("button", { class: "group-detail", onclick: guarded(() => showGroup(row.group)) }, "Detail"),
  ]);
}

async function showGroup(group) {
  const d = await api("GET", `/api/groups/${encodeURIComponent(group)}`);
  const box = $("#group-detail");
  const conns = el("table", { id: "group-connections" });
  fillTable(conns, [["clientId", "Client id"], ["clientAddr", "Address"], ["language", "Language"],
    ["versionDesc", "Version", (r) => r.versionDesc || r.version]], d.connections);
  const subs = el("table", { id: "group-subscriptions" });
  fillTable(subs, [["topic", "Topic"], ["subString", "Expression"], ["expressionType", "Type"]],
    d.subscriptions);
  const progress = el("table", { id: "group-progress" });
  fillTable(progress, [["topic", "Topic"], ["brokerName", "Broker"], ["queueId", "Queue"],
    ["brokerOffset", "Broker offset"], ["consumerOffset", "Consumer offset"], ["diff", "Lag"],
    ["lastTimestamp", "Last consumed", (r) => when(r.lastTimestamp)]], d.progress);
  // the group's own topics first, its retry topic after them
  const topics = [...new Set(d.progress.map((r) => r.topic))]
    .sort((a, b) => (a.startsWith("%RETRY%") - b.startsWith("%RETRY%")) || a.localeCompare(b));
  const topicSelect = el("select", { id: "reset-topic" }, ...topics.map((t) => el("option", { value: t }, t)));
  const time = el("input", { id: "reset-time", type: "datetime-local", step: "1", value: localInput(Date.now() - 3600000) });
  const refresh = () => showGroup(group);
  box.replaceChildren(
    el("h2", {}, `Group ${group}`, d.online ? "" : el("span", { class: "warn" }, " (no consumer online)")),
    el("p", {}, "Total lag: ", el("strong", { id: "group-lag" }, d.lag)),
    el("button", { id: "group-refresh", onclick: guarded(refresh) }, "Refresh"),
    el("h2", {}, "Clients"), conns, el("h2", {}, "Subscriptions"), subs,
    el("h2", {}, "Lag per queue"), progress,
    el("h2", {}, "Reset offsets"),
    el("label", {}, "Topic ", topicSelect), " ",
    el("label", {}, "To time ", time), " ",
    el("button", { id: "reset-submit", onclick: guarded(async () => {
      const r = await api("POST", `/api/groups/${encodeURIComponent(group)}/reset`,
        { topic: topicSelect.value, timestamp: fromInput(time.value) });
      showNotice(`offsets of ${group} on ${topicSelect.value} reset (${r.rows.length} queues${r.offline ? ", written by the console: no consumer online" : ""})`);
      await refresh();
    }) }, "Reset"), " ",
    el("button", { id: "skip-submit", onclick: guarded(async () => {
      const r = await api("POST", `/api/groups/${encodeURIComponent(group)}/skip`, { topic: topicSelect.value });
      showNotice(`backlog of ${group} on ${topicSelect.value} skipped (${r.rows.length} queues)`);
      await refresh();
    }) }, "Skip accumulated messages"));
  box.hidden = false;
}

$("#group-filter").addEventListener("input", renderGroups);
$("#group-show-system").addEventListener("change", renderGroups);
$("#groups-refresh").addEventListener("click", guarded(loadGroups));

// ---- messages ---------------------------------------------------------------------------
async function searchMessages(query) {
  $("#msg-results").replaceChildren();  // nothing stale shown while the search runs
  $("#msg-detail").hidden = true;
  showMessages(await api("GET", `/api/messages?${query}`));
}

function showMessages(data) {
  state.messages = data.messages;
  fillTable($("#msg-results"), [["msgId", "Message id"], ["tags", "Tag"], ["keys", "Keys"],
    ["brokerName", "Broker"], ["queueId", "Queue"], ["queueOffset", "Offset"],
    ["storeTimestamp", "Stored", (r) => when(r.storeTimestamp)]], data.messages, (row) => [
    el("button", { class: "msg-detail", onclick: () => showMessage(row) }, "Detail"),
  ]);
  if (!data.messages.length) showNotice("no message found");
  else if (data.truncated) showNotice(`showing the newest ${data.messages.length} messages`);
  $("#msg-detail").hidden = true;
}

function showMessage(m) {
  const props = el("table", { id: "msg-properties" });
  fillTable(props, [["k", "Property"], ["v", "Value"]],
    Object.entries(m.properties || {}).map(([k, v]) => ({ k, v })));
  const info = el("table");
  fillTable(info, [["k", "Field"], ["v", "Value"]], [
    ["topic", m.topic], ["msgId", m.msgId], ["offsetMsgId", m.offsetMsgId], ["tags", m.tags],
    ["keys", m.keys], ["queue", `${m.brokerName}:${m.queueId} offset ${m.queueOffset}`],
    ["bornHost", m.bornHost], ["storeHost", m.storeHost], ["bornTimestamp", when(m.bornTimestamp)],
    ["storeTimestamp", when(m.storeTimestamp)], ["reconsumeTimes", m.reconsumeTimes],
    ["bodySize", m.bodySize]].map(([k, v]) => ({ k, v })));
  const group = el("input", { id: "direct-group", placeholder: "consumer group" });
  const client = el("input", { id: "direct-client", placeholder: "client id" });
  const result = el("pre", { id: "direct-result", hidden: "" });
  const box = $("#msg-detail");
  box.replaceChildren(el("h2", {}, `Message ${m.msgId}`), info, el("h2", {}, "Properties"), props,
    el("h2", {}, "Body"), el("pre", { id: "msg-body" }, m.body),
    el("h2", {}, "Consume directly"), group, " ", client, " ",
    el("button", { id: "direct-submit", onclick: guarded(async () => {
      const r = await api("POST", "/api/messages/consume-directly",
        { group: group.value, clientId: client.value, msgId: m.offsetMsgId || m.msgId });
      result.textContent = JSON.stringify(r, null, 2);
      result.hidden = false;
    }) }, "Consume"), result);
  box.hidden = false;
}

$("#msg-time-form").addEventListener("submit", guarded(async (ev) => {
  ev.preventDefault();
  const q = new URLSearchParams({ topic: $("#msg-topic").value.trim() });
  const begin = fromInput($("#msg-begin").value);
  const end = fromInput($("#msg-end").value);
  if (begin !== null) q.set("begin", begin);
  if (end !== null) q.set("end", end);
  await searchMessages(q);
}));
$("#msg-key-form").addEventListener("submit", guarded(async (ev) => {
  ev.preventDefault();
  const q = new URLSearchParams({ topic: $("#msg-key-topic").value.trim(), key: $("#msg-key").value.trim() });
  await searchMessages(q);
}));
$("#msg-id-form").addEventListener("submit", guarded(async (ev) => {
  ev.preventDefault();
  const q = new URLSearchParams({ topic: $("#msg-id-topic").value.trim(), id: $("#msg-id").value.trim() });
  await searchMessages(q);
}));

// ---- producers --------------------------------------------------------------------------
$("#prod-form").addEventListener("submit", guarded(async (ev) => {
  ev.preventDefault();
  const q = new URLSearchParams({ topic: $("#prod-topic").value.trim(), group: $("#prod-group").value.trim() });
  const data = await api("GET", `/api/producers?${q}`);
  fillTable($("#prod-table"), [["clientId", "Client id"], ["clientAddr", "Address"],
    ["language", "Language"], ["versionDesc", "Version", (r) => r.versionDesc || r.version]],
    data.connectionSet || []);
  if (!(data.connectionSet || []).length) showNotice("no producer of that group is connected");
}));

// ---- live charts ------------------------------------------------------------------------
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"];

function drawChart(canvas, legend, series) {
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, pad = 40;
  ctx.clearRect(0, 0, w, h);
  const points = series.flatMap((s) => s.points);
  legend.replaceChildren(...series.map((s, i) =>
    el("span", {}, el("i", { style: `background:${COLORS[i % COLORS.length]}` }), s.name)));
  ctx.strokeStyle = "#c9d1db";
  ctx.strokeRect(pad, 10, w - pad - 10, h - pad - 10);
  if (!points.length) return;
  const t0 = Math.min(...points.map((p) => p[0])), t1 = Math.max(...points.map((p) => p[0]));
  const top = Math.max(1, ...points.map((p) => p[1]));
  const x = (t) => pad + (t1 === t0 ? 0 : (t - t0) / (t1 - t0)) * (w - pad - 10);
  const y = (v) => h - pad - (v / top) * (h - pad - 20);
  ctx.fillStyle = "#56606b";
  ctx.font = "11px sans-serif";
  ctx.fillText(String(Math.round(top)), 4, 16);
  ctx.fillText("0", 4, h - pad);
  ctx.fillText(new Date(t0).toLocaleTimeString(), pad, h - pad + 16);
  ctx.fillText(new Date(t1).toLocaleTimeString(), w - 90, h - pad + 16);
  series.forEach((s, i) => {
    ctx.strokeStyle = COLORS[i % COLORS.length];
    ctx.beginPath();
    s.points.forEach((p, j) => (j ? ctx.lineTo(x(p[0]), y(p[1])) : ctx.moveTo(x(p[0]), y(p[1]))));
    ctx.stroke();
  });
}

async function loadLive() {
  const data = await api("GET", "/api/live");
  const tps = [];
  for (const [name, pts] of Object.entries(data.tps)) {
    tps.push({ name: `${name} put`, points: pts.map((p) => [p[0], p[1]]) });
    tps.push({ name: `${name} get`, points: pts.map((p) => [p[0], p[2]]) });
  }
  drawChart($("#chart-tps"), $("#legend-tps"), tps);
  drawChart($("#chart-lag"), $("#legend-lag"),
    Object.entries(data.lag).map(([name, pts]) => ({ name, points: pts })));
}

// ---- pages ------------------------------------------------------------------------------
const LOADERS = { cluster: loadCluster, topics: loadTopics, groups: loadGroups, live: loadLive,
  messages: async () => {
    if (!$("#msg-begin").value) $("#msg-begin").value = localInput(Date.now() - 3600000);
    if (!$("#msg-end").value) $("#msg-end").value = localInput(Date.now() + 60000);
  },
  producers: async () => {} };
let liveTimer = null;

async function showPage() {
  const page = (location.hash || "#cluster").slice(1);
  state.page = LOADERS[page] ? page : "cluster";
  document.querySelectorAll(".page").forEach((p) => { p.hidden = p.id !== `page-${state.page}`; });
  document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.page === state.page));
  clearInterval(liveTimer);
  if (state.page === "live") liveTimer = setInterval(guarded(loadLive), 2000);
  await guarded(LOADERS[state.page])();
}

window.addEventListener("hashchange", showPage);
guarded(loadSession)().then(showPage);
