'use strict';
// One interop scenario run by ali-ons (a pure JavaScript RocketMQ 4.x remoting
// client) against rmq.  The parent passes the path of a JSON spec and reads one JSON
// object from the last stdout line.  Every warning and error the client logs, and
// every 'error' event, is returned in `problems` so the test can fail on them.
//
// Ops (each may carry "credentials": {"access_key","secret_key"}: ali-ons then signs
// every request for plain ACL, as accessKeyId/accessKeySecret):
//   produce {"messages": [{"topic","tags","keys","props","body_hex"}]}
//   push    {"group","topic","expression","out","stop","max_s","fail_first_keys","fail_dir"}

const fs = require('fs');
const crypto = require('crypto');
const { Producer, Consumer, Message } = require('ali-ons');

const spec = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const problems = [];

// also appended to $HOME/problems.log as they happen, for a test that times out
const problemLog = require('path').join(process.env.HOME || '.', 'problems.log');

function record(level) {
  return (...args) => {
    const text = `${level}: ${args.map(a => (a && a.stack) || String(a)).join(' ')}`;
    problems.push(text);
    fs.appendFileSync(problemLog, text + '\n');
  };
}

const infoLog = require('path').join(process.env.HOME || '.', 'info.log');
const logger = {
  debug() {},
  info: (...args) => fs.appendFileSync(infoLog, args.map(String).join(' ') + '\n'),
  warn: record('warn'),
  error: record('error'),
};

function options(extra) {
  // httpclient is only used to look up name servers over HTTP, never with nameSrv
  const credentials = spec.credentials ?
    { accessKeyId: spec.credentials.access_key, accessKeySecret: spec.credentials.secret_key } : {};
  return Object.assign({ nameSrv: spec.namesrv, httpclient: {}, logger,
    instanceName: spec.instance || `ons-${process.pid}` }, credentials, extra);
}

function describe(msg) {
  const body = msg.body || Buffer.alloc(0);
  const props = {};
  for (const name of [ 'UNIQ_KEY', 'color', 'shape', 'RETRY_TOPIC', 'ORIGIN_MESSAGE_ID' ]) {
    if (msg.properties && msg.properties[name]) props[name] = msg.properties[name];
  }
  return {
    topic: msg.topic, tags: msg.tags || '', keys: [].concat(msg.keys || []).join(' '), id: msg.msgId,
    queue_id: msg.queueId, queue_offset: Number(msg.queueOffset),
    reconsume_times: msg.reconsumeTimes, store_size: msg.storeSize,
    body_sha: crypto.createHash('sha256').update(body).digest('hex'), body_len: body.length,
    body_head: body.subarray(0, 64).toString('utf8'), props,
  };
}

async function produce() {
  const producer = new Producer(options({ producerGroup: spec.group || 'ons_pg' }));
  producer.on('error', record('event'));
  await producer.ready();
  const results = [];
  for (const m of spec.messages) {
    const msg = new Message(m.topic, m.tags || '', Buffer.from(m.body_hex || '', 'hex'));
    if (m.keys) msg.keys = [ m.keys ];
    for (const [ k, v ] of Object.entries(m.props || {})) msg.properties[k] = v;
    try {
      const r = await producer.send(msg);
      results.push({ ok: true, status: r.sendStatus, msg_id: r.msgId, offset: Number(r.queueOffset),
        queue_id: Number(r.messageQueue.queueId) });
    } catch (err) {
      results.push({ ok: false, error: `${err.name}: ${err.message}` });
    }
  }
  await producer.close();
  return { results };
}

// The first delivery of a key anywhere in the group (a marker file created with O_EXCL
// in the group's fail_dir): instances share it, so only that one delivery fails.
function firstSight(key) {
  try {
    fs.closeSync(fs.openSync(require('path').join(spec.fail_dir, encodeURIComponent(key)), 'wx'));
    return true;
  } catch (err) {
    return false;
  }
}

async function consume() {
  const consumer = new Consumer(options({
    consumerGroup: spec.group,
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
    persistConsumerOffsetInterval: 1000,
    rebalanceInterval: 2000,
  }));
  consumer.on('error', record('event'));
  const out = fs.openSync(spec.out, 'a');
  const failFirst = new Set(spec.fail_first_keys || []);
  consumer.subscribe(spec.topic, spec.expression || '*', async msg => {
    const r = describe(msg);
    r.status = 'ok';
    if (failFirst.has(r.keys) && firstSight(r.keys)) r.status = 'later';
    fs.writeSync(out, JSON.stringify(r) + '\n');
    return r.status === 'later' ? Consumer.ACTION_RETRY : undefined;
  });
  await consumer.ready();
  const deadline = Date.now() + 1000 * (spec.max_s || 60);
  while (!fs.existsSync(spec.stop) && Date.now() < deadline) {
    await new Promise(resolve => setTimeout(resolve, 50));
  }
  await consumer.close();
  fs.closeSync(out);
  return { stopped_by: fs.existsSync(spec.stop) ? 'stop' : 'max_s' };
}

const ops = { produce, push: consume };

(async () => {
  let result;
  try {
    result = await ops[spec.op]();
    result.ok = true;
  } catch (err) {
    result = { ok: false, error: `${err.name}: ${err.message}` };
  }
  result.problems = problems;
  process.stdout.write(JSON.stringify(result) + '\n');
  process.exit(0);
})();
