// A real RocketMQ consumer (npm ali-ons 3.12.0, pure JS remoting) for the live DLQ tests.
//   node js_consume.js NS GROUP TOPIC EXPECT TIMEOUT_S
// Prints {"started":true} once ready, then one JSON line per message (topic, tags, keys, body,
// msg id, reconsume count, properties), then {"done":...}. Exit 0 once EXPECT distinct
// MQTOOL_RESEND_ID values were received, 1 on timeout. Consumes from the first offset.
'use strict';
const { Consumer } = require('ali-ons');

const out = o => process.stdout.write(JSON.stringify(o) + '\n');
const sleep = ms => new Promise(r => setTimeout(r, ms));
const quiet = new Proxy({}, { get: (_, name) => (name === 'error'
  ? (...a) => process.stderr.write(a.join(' ') + '\n') : () => {}) });

(async () => {
  const [ns, group, topic, expect, timeoutS] = process.argv.slice(2);
  const seen = new Set();
  const consumer = new Consumer({ httpclient: {}, nameSrv: ns, consumerGroup: group,
    logger: quiet, consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET' });
  consumer.on('error', () => {});
  consumer.subscribe(topic, '*', async msg => {
    const props = msg.properties || {};
    out({ topic: msg.topic, tags: msg.tags, keys: msg.keys, body: msg.body.toString(),
      id: msg.msgId, reconsume: msg.reconsumeTimes, props });
    if (props.MQTOOL_RESEND_ID) seen.add(props.MQTOOL_RESEND_ID);
  });
  await consumer.ready();
  out({ started: true });
  const t0 = Date.now();
  while (Date.now() - t0 < Number(timeoutS) * 1000 && seen.size < Number(expect)) await sleep(100);
  await sleep(1000);
  await consumer.close();
  out({ done: seen.size >= Number(expect), distinct: seen.size });
  process.exit(seen.size >= Number(expect) ? 0 : 1);
})().catch(e => { process.stderr.write('ERR ' + (e && e.stack || e) + '\n'); process.exit(3); });
