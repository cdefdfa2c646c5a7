// Apache's official RocketMQ 5.x Node.js client (npm rocketmq-client-nodejs) as a
// producer against rmq's gRPC endpoint.
//
//   node producer.js ENDPOINT TOPIC COUNT
//
// Prints one JSON object per line: a receipt per message sent, an error with
// the exception text when a send fails, and done.
'use strict';

const { Producer } = require('rocketmq-client-nodejs');

async function main() {
  const [endpoints, topic, countText] = process.argv.slice(2);
  const count = Number(countText);
  const producer = new Producer({ endpoints, namespace: '', topics: [ topic ] });
  await producer.startup();
  try {
    for (let i = 0; i < count; i++) {
      const body = `node-${i}`;
      try {
        const receipt = await producer.send({
          topic, tag: 'TagN', keys: [ `nk${i}` ], body: Buffer.from(body),
          properties: new Map([[ 'lang', 'node' ]]),
        });
        console.log(JSON.stringify({ receipt: { body, message_id: receipt.messageId } }));
      } catch (err) {
        console.log(JSON.stringify({ error: { body, text: String(err && err.message || err) } }));
      }
    }
    console.log(JSON.stringify({ done: true }));
  } finally {
    await producer.shutdown();
  }
}

main().catch(err => {
  console.error(err);
  process.exit(1);
});
