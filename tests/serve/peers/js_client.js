// A real RocketMQ client (npm ali-ons 3.12.0, pure JS remoting) driven by the serve tests.
// Prints one JSON line per event.
//   node js_client.js produce NS TOPIC PREFIX COUNT [ORDERLY QUEUE BIG]
// produce: COUNT sends; ORDERLY sends to queue QUEUE (the client's own send-to-a-queue path,
// sendKernelImpl, which send() calls after picking a queue: ali-ons 3.12.0 has no oneway,
// orderly or batch API); BIG sends of a 6,000-byte body (the client zlib-compresses > 4 KiB).
//   node js_client.js consume NS GROUP TOPIC EXPECT_OK TIMEOUT_S [FAIL_PREFIX MAX_RECONSUME]
// consume: a push consumer from the first offset; keys starting with FAIL_PREFIX throw (the
// client sends them back with maxReconsumeTimes MAX_RECONSUME); exits 0 once EXPECT_OK keys were
// consumed and every failing key was delivered MAX_RECONSUME + 1 times (then waits 3 s).
//   node js_client.js orderly NS GROUP TOPIC MAX CLIENT_V5 TIMEOUT_S
// orderly: stands in for an orderly push consumer (ali-ons 3.12.0 has none) with the client's
// own pieces: its push consumer pulls each message, which fails MAX + 1 times locally (no broker
// request: ConsumeMessageOrderlyService#checkReconsumeTimes only counts), then its producer sends
// the message to %RETRY%GROUP as the Java client's sendMessageBack builds it (the consumed
// message's properties, ORIGIN_MESSAGE_ID, RETRY_TOPIC, RECONSUME_TIME = the local count, + 1
// when CLIENT_V5 is 1 (apache/rocketmq #6164), MAX_RECONSUME_TIMES, DELAY = 3 + the local count;
// the producer's sendKernelImpl moves RECONSUME_TIME/MAX_RECONSUME_TIMES into the header) and
// the message counts as consumed. Exits 0 once one message was sent back.
'use strict';
const { Producer, Consumer, Message } = require('ali-ons');
const MessageQueue = require('ali-ons/lib/message_queue');

const out = o => process.stdout.write(JSON.stringify(o) + '\n');
const sleep = ms => new Promise(r => setTimeout(r, ms));
// ali-ons logs through any method of `logger`; keep stdout for our JSON lines
const quiet = new Proxy({}, { get: (_, name) => (name === 'error'
  ? (...a) => process.stderr.write(a.join(' ') + '\n') : () => {}) });
const firstKey = msg => (typeof msg.keys === 'string' ? msg.keys.split(' ')[0] : (msg.keys || [])[0]) || '';

async function produce(ns, topic, prefix, count, orderly = 0, queue = 0, big = 0) {
  const producer = new Producer({ httpclient: {}, nameSrv: ns, producerGroup: 'PID-' + prefix, logger: quiet });
  await producer.ready();
  let ok = true;
  for (let i = 0; i < count; i++) {
    const key = `${prefix}-sync-${i}`;
    const m = new Message(topic, 'TagA', 'body of ' + key);
    m.keys = [ key ];
    const r = await producer.send(m);
    out({ mode: 'sync', key, status: r.sendStatus, msg_id: r.msgId, queue: r.messageQueue.queueId, offset: r.queueOffset });
    ok = ok && r.sendStatus === 'SEND_OK';
  }
  const route = await producer.tryToFindTopicPublishInfo(topic);
  const brokerName = route.messageQueueList[0].brokerName;
  for (let i = 0; i < orderly; i++) {
    const key = `${prefix}-orderly-${i}`;
    const m = new Message(topic, 'TagA', 'body of ' + key);
    m.keys = [ key ];
    const r = await producer.sendKernelImpl(m, new MessageQueue(topic, brokerName, queue));
    out({ mode: 'orderly', key, status: r.sendStatus, msg_id: r.msgId, queue: r.messageQueue.queueId, offset: r.queueOffset });
    ok = ok && r.sendStatus === 'SEND_OK';
  }
  for (let i = 0; i < big; i++) {
    const key = `${prefix}-big-${i}`;
    const m = new Message(topic, 'TagA', ('body of ' + key).padEnd(6000, '.'));
    m.keys = [ key ];
    const r = await producer.send(m);
    out({ mode: 'big', key, status: r.sendStatus, msg_id: r.msgId, queue: r.messageQueue.queueId, offset: r.queueOffset });
    ok = ok && r.sendStatus === 'SEND_OK';
  }
  await producer.close();
  return ok ? 0 : 1;
}

async function consume(ns, group, topic, expectOk, timeoutS, failPrefix, maxReconsume) {
  const okKeys = new Set();
  const fails = {};
  const opts = { httpclient: {}, nameSrv: ns, consumerGroup: group, logger: quiet,
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET' };
  if (failPrefix) opts.maxReconsumeTimes = maxReconsume;
  const consumer = new Consumer(opts);
  consumer.on('error', () => {});
  consumer.subscribe(topic, '*', async msg => {
    const key = firstKey(msg);
    const failing = Boolean(failPrefix) && key.startsWith(failPrefix);
    out({ key, topic: msg.topic, reconsume: msg.reconsumeTimes, queue: msg.queueId, body: msg.body.toString(), fail: failing });
    if (failing) {
      fails[key] = (fails[key] || 0) + 1;
      throw new Error('chosen to fail: ' + key);
    }
    okKeys.add(key);
  });
  await consumer.ready();
  const t0 = Date.now();
  let done = false;
  while (Date.now() - t0 < timeoutS * 1000) {
    const failKeys = Object.keys(fails);
    const failDone = failKeys.length > 0 && failKeys.every(k => fails[k] >= maxReconsume + 1);
    if (okKeys.size >= expectOk && (!failPrefix || failDone)) { done = true; break; }
    await sleep(100);
  }
  if (done && failPrefix) await sleep(3000);
  await consumer.close();
  out({ done, ok: okKeys.size, fails });
  return done ? 0 : 1;
}

async function orderly(ns, group, topic, max, clientV5, timeoutS) {
  const producer = new Producer({ httpclient: {}, nameSrv: ns, producerGroup: 'PID-' + group, logger: quiet });
  await producer.ready();
  const consumer = new Consumer({ httpclient: {}, nameSrv: ns, consumerGroup: group, logger: quiet,
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET' });
  consumer.on('error', () => {});
  let sent = 0;
  consumer.subscribe(topic, '*', async msg => {
    let local = msg.reconsumeTimes;
    let attempts = 0;
    for (;;) {
      attempts += 1; // the listener answers SUSPEND_CURRENT_QUEUE_A_MOMENT
      if (local >= max) break;
      local += 1;
    }
    msg.properties.CONSUME_START_TIME = String(Date.now());
    const back = new Message('%RETRY%' + group, msg.body);
    back.properties = msg.properties; // MessageAccessor.setProperties: the consumed map itself
    back.properties.RECONSUME_TIME = String(local);
    if (!back.properties.ORIGIN_MESSAGE_ID) back.properties.ORIGIN_MESSAGE_ID = msg.properties.UNIQ_KEY || msg.msgId;
    back.flag = msg.flag;
    back.properties.RETRY_TOPIC = msg.topic;
    back.properties.RECONSUME_TIME = String(clientV5 ? local + 1 : local);
    back.properties.MAX_RECONSUME_TIMES = String(max);
    delete back.properties.TRAN_MSG;
    back.delayTimeLevel = 3 + local;
    const r = await producer.send(back);
    out({ key: firstKey(msg), attempts, status: r.sendStatus, topic: back.topic });
    sent += 1;
  });
  await consumer.ready();
  const t0 = Date.now();
  while (sent === 0 && Date.now() - t0 < timeoutS * 1000) await sleep(100);
  await sleep(1000);
  await consumer.close();
  await producer.close();
  return sent > 0 ? 0 : 1;
}

(async () => {
  const a = process.argv.slice(2);
  let rc;
  if (a[0] === 'produce') rc = await produce(a[1], a[2], a[3], Number(a[4]), Number(a[5] || 0), Number(a[6] || 0), Number(a[7] || 0));
  else if (a[0] === 'consume') rc = await consume(a[1], a[2], a[3], Number(a[4]), Number(a[5]), a[6], Number(a[7] || 0));
  else if (a[0] === 'orderly') rc = await orderly(a[1], a[2], a[3], Number(a[4]), a[5] === '1', Number(a[6]));
  else rc = 2;
  // stdout to a pipe is asynchronous: exit once everything written has been flushed
  process.stdout.write('', () => process.exit(rc));
})().catch(e => { process.stderr.write('ERR ' + (e && e.stack || e) + '\n'); process.exit(3); });
