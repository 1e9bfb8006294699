package mqtool.realmq;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.client.QueryResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * One scripted flow of the official Java client against a name server:
 * {@code Flow NAMESRV FLOW PREFIX}. Every topic and group the flow uses starts with PREFIX.
 * Prints one JSON line per observation: {"step": ..., then what the client saw}. A client
 * exception is an observation too ({"error": class, "code": response code}). Exit 0 when the
 * flow ran to its end (whatever it observed), 2 when it could not.
 */
public final class Flow {
    private Flow() {
    }

    private static String namesrv;
    private static String prefix;
    private static final AtomicInteger INSTANCES = new AtomicInteger();

    // -- output --------------------------------------------------------------------------------

    static synchronized void out(String step, Object... kv) {
        StringBuilder b = new StringBuilder("{\"step\":").append(Json.str(step));
        for (int i = 0; i + 1 < kv.length; i += 2) {
            b.append(',').append(Json.str((String) kv[i])).append(':').append(value(kv[i + 1]));
        }
        System.out.println(b.append('}'));
        System.out.flush();
    }

    static String value(Object v) {
        if (v == null) {
            return "null";
        }
        if (v instanceof Number || v instanceof Boolean) {
            return v.toString();
        }
        if (v instanceof RawJson) {
            return ((RawJson) v).text;
        }
        if (v instanceof Collection) {
            StringBuilder b = new StringBuilder("[");
            for (Object o : (Collection<?>) v) {
                if (b.length() > 1) {
                    b.append(',');
                }
                b.append(value(o));
            }
            return b.append(']').toString();
        }
        if (v instanceof Map) {
            StringBuilder b = new StringBuilder("{");
            for (Map.Entry<?, ?> e : new TreeMap<>((Map<?, ?>) v).entrySet()) {
                if (b.length() > 1) {
                    b.append(',');
                }
                b.append(Json.str(String.valueOf(e.getKey()))).append(':').append(value(e.getValue()));
            }
            return b.append('}').toString();
        }
        return Json.str(v.toString());
    }

    static final class RawJson {
        final String text;

        RawJson(String text) {
            this.text = text;
        }
    }

    /** What a client exception says: its class and response code (and the text, for people). */
    static void error(String step, Throwable e, Object... kv) {
        Throwable t = e;
        int code = -1;
        if (t instanceof MQBrokerException) {
            code = ((MQBrokerException) t).getResponseCode();
        } else if (t instanceof MQClientException) {
            code = ((MQClientException) t).getResponseCode();
            if (code == -1 && t.getCause() instanceof MQBrokerException) {
                code = ((MQBrokerException) t.getCause()).getResponseCode();
            }
        }
        Object[] all = new Object[kv.length + 6];
        System.arraycopy(kv, 0, all, 0, kv.length);
        all[kv.length] = "error";
        all[kv.length + 1] = t.getClass().getSimpleName();
        all[kv.length + 2] = "code";
        all[kv.length + 3] = code;
        all[kv.length + 4] = "text";
        String msg = String.valueOf(t.getMessage());
        all[kv.length + 5] = msg.length() > 300 ? msg.substring(0, 300) : msg;
        out(step, all);
    }

    static Map<String, Object> seen(MessageExt m) {
        Map<String, Object> d = new TreeMap<>();
        d.put("topic", m.getTopic());
        d.put("queueId", m.getQueueId());
        d.put("queueOffset", m.getQueueOffset());
        d.put("tags", m.getTags());
        d.put("keys", m.getKeys());
        d.put("body", new String(m.getBody(), StandardCharsets.UTF_8));
        d.put("reconsumeTimes", m.getReconsumeTimes());
        d.put("flag", m.getFlag());
        d.put("sysFlag", m.getSysFlag());
        d.put("msgId", m.getMsgId());
        d.put("properties", new TreeMap<>(m.getProperties()));
        return d;
    }

    static void sent(String step, SendResult r, Object... kv) {
        Object[] all = new Object[kv.length + 10];
        System.arraycopy(kv, 0, all, 0, kv.length);
        int i = kv.length;
        all[i++] = "status";
        all[i++] = r.getSendStatus().name();
        all[i++] = "msgIds";
        all[i++] = r.getMsgId() == null ? 0 : r.getMsgId().split(",").length;
        all[i++] = "queueId";
        all[i++] = r.getMessageQueue().getQueueId();
        all[i++] = "queueOffset";
        all[i++] = r.getQueueOffset();
        all[i++] = "msgId";
        all[i++] = r.getMsgId();
        out(step, all);
    }

    // -- clients -------------------------------------------------------------------------------

    static String instance() {
        return "flow-" + ProcessHandle.current().pid() + "-" + INSTANCES.incrementAndGet();
    }

    /** The name server, an instance of its own, and room for a loaded machine: 15 s for any
     * request (the client's default is 3 s). */
    static <C extends ClientConfig> C config(C c) {
        c.setNamesrvAddr(namesrv);
        c.setInstanceName(instance());
        c.setMqClientApiTimeout(15000);
        return c;
    }

    static DefaultMQProducer producer(String group) throws MQClientException {
        DefaultMQProducer p = config(new DefaultMQProducer(group));
        p.setSendMsgTimeout(15000);
        p.start();
        return p;
    }

    static DefaultMQPushConsumer pushConsumer(String group) {
        DefaultMQPushConsumer c = config(new DefaultMQPushConsumer(group));
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        return c;
    }

    static Message msg(String topic, String tag, String key, String body) {
        return new Message(topic, tag, key, body.getBytes(StandardCharsets.UTF_8));
    }

    static void sendEach(DefaultMQProducer p, String step, List<Message> msgs) throws Exception {
        for (Message m : msgs) {
            try {
                sent(step, p.send(m), "key", m.getKeys());
            } catch (Exception e) {
                error(step, e, "key", m.getKeys());
            }
        }
    }

    static boolean await(CountDownLatch l, long ms) throws InterruptedException {
        return l.await(ms, TimeUnit.MILLISECONDS);
    }

    // -- flows ---------------------------------------------------------------------------------

    /** Sync, async, oneway, batch, orderly, delayed and oversize sends; an unknown topic. */
    static void produce() throws Exception {
        String t = prefix + "Send";
        DefaultMQProducer p = producer(prefix + "_pg");
        try {
            List<Message> sync = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                Message m = msg(t, i % 2 == 0 ? "TagA" : "TagB", "s-" + i + " s-x", "sync-" + i);
                m.putUserProperty("user", "u-" + i);
                sync.add(m);
            }
            sendEach(p, "sync", sync);
            CountDownLatch async = new CountDownLatch(4);
            for (int i = 0; i < 4; i++) {
                final String key = "a-" + i;
                p.send(msg(t, "TagC", key, "async-" + i), new SendCallback() {
                    @Override
                    public void onSuccess(SendResult r) {
                        sent("async", r, "key", key);
                        async.countDown();
                    }

                    @Override
                    public void onException(Throwable e) {
                        error("async", e, "key", key);
                        async.countDown();
                    }
                });
            }
            out("async.done", "all", await(async, 60000));
            for (int i = 0; i < 2; i++) {
                p.sendOneway(msg(t, "TagD", "o-" + i, "oneway-" + i));
            }
            List<Message> batch = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                Message m = msg(t, "TagB", "b-" + i, "batch-" + i);
                m.putUserProperty("idx", String.valueOf(i));
                batch.add(m);
            }
            try {
                sent("batch", p.send(batch), "n", batch.size());
            } catch (Exception e) {
                error("batch", e, "n", batch.size());
            }
            for (int i = 0; i < 6; i++) {
                final int order = i % 2;
                try {
                    SendResult r = p.send(msg(t, "TagO", "ord-" + order + "-" + i, "order-" + i),
                        (mqs, m, arg) -> mqs.get((Integer) arg % mqs.size()), order);
                    sent("orderly", r, "key", "ord-" + order + "-" + i, "order", order);
                } catch (Exception e) {
                    error("orderly", e, "i", i);
                }
            }
            Message delayed = msg(t, "TagL", "d-0", "delayed");
            delayed.setDelayTimeLevel(2);
            sendEach(p, "delay", Collections.singletonList(delayed));
            byte[] big = new byte[4 * 1024 * 1024];
            new Random(7).nextBytes(big);
            try {
                sent("oversize", p.send(new Message(t, "TagX", "big-0", big)));
            } catch (Exception e) {
                error("oversize", e);
            }
            byte[] near = new byte[4 * 1024 * 1024 - 64];
            new Random(8).nextBytes(near);
            try {
                sent("oversize.record", p.send(new Message(t, "TagX", "big-1", near)));
            } catch (Exception e) {
                error("oversize.record", e);
            }
            // uncompressed: a body just under maxMessageSize is stored, its record larger
            p.setCompressMsgBodyOverHowmuch(Integer.MAX_VALUE);
            try {
                sent("oversize.plain", p.send(new Message(t, "TagX", "big-2", near)));
            } catch (Exception e) {
                error("oversize.plain", e);
            }
            byte[] fits = new byte[4 * 1024 * 1024 - 2048];
            new Random(9).nextBytes(fits);
            try {
                sent("fits.plain", p.send(new Message(t, "TagX", "big-3", fits)));
            } catch (Exception e) {
                error("fits.plain", e);
            }
            p.setCompressMsgBodyOverHowmuch(4096);
            try {
                out("route.unknown", "queues", p.fetchPublishMessageQueues(prefix + "Nope").size());
            } catch (Exception e) {
                error("route.unknown", e);
            }
            String fresh = prefix + "Fresh";
            sendEach(p, "autocreate", Collections.singletonList(msg(fresh, "T", "f-0", "fresh")));
            out("route.autocreated", "queues", routeOnceRegistered(p, fresh).size());
        } finally {
            p.shutdown();
        }
    }

    /**
     * The publish queues of a topic a send just created. A broker registers such a topic with
     * the name server in the background, so the route may lag the send by a moment.
     */
    static List<MessageQueue> routeOnceRegistered(DefaultMQProducer p, String topic)
            throws Exception {
        for (int attempt = 0; ; attempt++) {
            try {
                return p.fetchPublishMessageQueues(topic);
            } catch (MQClientException e) {
                if (attempt >= 40) {
                    throw e;
                }
                Thread.sleep(250);
            }
        }
    }

    /** A push consumer (concurrent) that fails two messages until they reach the DLQ. */
    static void consumeRetry() throws Exception {
        String t = prefix + "Retry";
        DefaultMQProducer p = producer(prefix + "_pg");
        List<Message> msgs = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            msgs.add(msg(t, "T", "r-" + i, i == 1 || i == 4 ? "fail" : "ok"));
        }
        sendEach(p, "send", msgs);
        p.shutdown();
        int max = 2;
        // every ok message once, every failing one 1 + max times
        CountDownLatch done = new CountDownLatch(4 + 2 * (1 + max));
        DefaultMQPushConsumer c = pushConsumer(prefix + "_cg");
        c.setMaxReconsumeTimes(max);
        c.subscribe(t, "*");
        c.registerMessageListener((MessageListenerConcurrently) (list, ctx) -> {
            for (MessageExt m : list) {
                out("deliver", "m", seen(m));
                done.countDown();
                if ("fail".equals(new String(m.getBody(), StandardCharsets.UTF_8))) {
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.setConsumeMessageBatchMaxSize(1);
        c.start();
        out("done", "all", await(done, 120000));
        Thread.sleep(3000);  // the last send-back reaches the DLQ
        c.shutdown();
    }

    /** An orderly push consumer: one queue in order; one message fails until the DLQ. */
    static void consumeOrderly() throws Exception {
        String t = prefix + "Ord";
        DefaultMQProducer p = producer(prefix + "_pg");
        for (int i = 0; i < 6; i++) {
            Message m = msg(t, "T", "q-" + i, i == 2 ? "fail" : "ok-" + i);
            try {
                SendResult r = p.send(m, (mqs, mm, arg) -> mqs.get(0), null);
                sent("send", r, "key", m.getKeys());
            } catch (Exception e) {
                error("send", e, "key", m.getKeys());
            }
        }
        p.shutdown();
        int max = 2;
        CountDownLatch done = new CountDownLatch(5 + 1 + max);
        DefaultMQPushConsumer c = pushConsumer(prefix + "_cg");
        c.setMaxReconsumeTimes(max);
        c.setSuspendCurrentQueueTimeMillis(200);
        c.subscribe(t, "*");
        c.registerMessageListener((MessageListenerOrderly) (list, ctx) -> {
            for (MessageExt m : list) {
                out("deliver", "m", seen(m));
                done.countDown();
                if ("fail".equals(new String(m.getBody(), StandardCharsets.UTF_8))) {
                    return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT;
                }
            }
            return ConsumeOrderlyStatus.SUCCESS;
        });
        c.setConsumeMessageBatchMaxSize(1);
        c.start();
        out("done", "all", await(done, 120000));
        Thread.sleep(3000);
        c.shutdown();
    }

    /** Two broadcasting consumers of one group: each gets every message. */
    static void broadcast() throws Exception {
        String t = prefix + "Bc";
        DefaultMQProducer p = producer(prefix + "_pg");
        List<Message> msgs = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            msgs.add(msg(t, "T", "bc-" + i, "bc-" + i));
        }
        sendEach(p, "send", msgs);
        p.shutdown();
        CountDownLatch done = new CountDownLatch(8);
        List<DefaultMQPushConsumer> cs = new ArrayList<>();
        for (int k = 0; k < 2; k++) {
            final int who = k;
            DefaultMQPushConsumer c = pushConsumer(prefix + "_cg");
            broadcasting(c);
            c.subscribe(t, "*");
            c.registerMessageListener((MessageListenerConcurrently) (list, ctx) -> {
                for (MessageExt m : list) {
                    out("deliver", "consumer", who, "m", seen(m));
                    done.countDown();
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            c.start();
            cs.add(c);
        }
        out("done", "all", await(done, 90000));
        for (DefaultMQPushConsumer c : cs) {
            c.shutdown();
        }
    }

    /** MessageModel.BROADCASTING (its package differs between 4.x and 5.x). */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static void broadcasting(DefaultMQPushConsumer c) throws Exception {
        Class mm = c.getClass().getMethod("getMessageModel").getReturnType();
        c.getClass().getMethod("setMessageModel", mm).invoke(c, Enum.valueOf(mm, "BROADCASTING"));
    }

    /** Tag filter ("TagA || TagC") and, with the broker's enablePropertyFilter, SQL92. */
    static void filter(boolean v5) throws Exception {
        String t = prefix + "Tag";
        String s = prefix + "Sql";
        DefaultMQProducer p = producer(prefix + "_pg");
        List<Message> msgs = new ArrayList<>();
        for (String tag : new String[] {"TagA", "TagB", "TagC", "TagD"}) {
            msgs.add(msg(t, tag, "tf-" + tag, "tf-" + tag));
        }
        sendEach(p, "send", msgs);
        List<Message> sql = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            Message m = msg(s, "S", "sql-" + i, "sql-" + i);
            m.putUserProperty("a", String.valueOf(i));
            if (i % 2 == 0) {
                m.putUserProperty("b", "x" + i);
            }
            m.putUserProperty("c", i == 3 ? "x" : String.valueOf(i));
            sql.add(m);
        }
        sendEach(p, "send.sql", sql);
        p.shutdown();
        CountDownLatch tags = new CountDownLatch(2);
        DefaultMQPushConsumer c = recording(prefix + "_tg", t, "TagA || TagC", "deliver.tag", tags);
        out("done.tag", "all", await(tags, 60000));
        Thread.sleep(2000);  // nothing else comes
        c.shutdown();
        // each expression with how many of the six it selects: numbers compared with the
        // string properties, IN, IS NULL, NOT, a property that does not parse as a number
        // (c = 5: the message whose c is "x" fails the evaluation, no match), and two the
        // broker refuses to compile
        String[][] exprs = {
            {"a >= 3", "3"}, {"a BETWEEN 1 AND 2 OR b = 'x4'", "3"},
            {"a IN ('0', '5') AND TAGS = 'S'", "2"}, {"b IS NULL", "3"}, {"c = 5", "1"},
            {"NOT (a < 2)", "4"}, {"a > 'x'", "0"}, {"a = ", "0"},
        };
        if (v5) {
            exprs = new String[][] {
                {"b CONTAINS '4'", "1"}, {"b NOT STARTSWITH 'x'", "0"},
                {"KEYS ENDSWITH '-5' OR a = 0", "2"}, {"b NOT CONTAINS '2' AND a < 3", "1"},
            };
        }
        for (int e = 0; e < exprs.length; e++) {
            String expr = exprs[e][0];
            CountDownLatch sqls = new CountDownLatch(Integer.parseInt(exprs[e][1]));
            DefaultMQPushConsumer q = pushConsumer(prefix + "_sg" + e);
            try {
                q.subscribe(s, MessageSelector.bySql(expr));
                q.registerMessageListener((MessageListenerConcurrently) (list, ctx) -> {
                    for (MessageExt m : list) {
                        out("deliver.sql", "expr", expr, "m", seen(m));
                        sqls.countDown();
                    }
                    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
                });
                q.start();
                out("done.sql", "expr", expr, "all", await(sqls, 60000));
                Thread.sleep(2000);  // nothing else comes
            } catch (Exception x) {
                error("sql.start", x, "expr", expr);
            } finally {
                q.shutdown();
            }
        }
    }

    /** Lite pull with assign and seek; pull by offset with the pull consumer. */
    /**
     * Poll until {@code n} messages from queue offset {@code from} on came, one after the
     * other; they are {@code step}. What came before the last message at {@code from} is
     * {@code step + ".stale"}: a pull that was under way when the consumer sought (its
     * assign's first pull, or the pull before) can still deliver what it fetched when the
     * new pull task took the seek offset first (5.3.3 DefaultLitePullConsumerImpl only drops
     * a FOUND result while the seek offset is still set), which is timing.
     */
    static void pollFrom(DefaultLitePullConsumer lite, long from, int n, String step) {
        List<MessageExt> got = new ArrayList<>();
        int start = -1;
        long end = System.currentTimeMillis() + 30000;
        while ((start < 0 || got.size() - start < n) && System.currentTimeMillis() < end) {
            got.addAll(lite.poll(1000));
            for (int i = got.size() - 1; i >= 0; i--) {
                if (got.get(i).getQueueOffset() == from) {
                    start = i;
                    break;
                }
            }
        }
        for (int i = 0; i < got.size(); i++) {
            out(start >= 0 && i >= start ? step : step + ".stale", "m", seen(got.get(i)));
        }
    }

    static void pull() throws Exception {
        String t = prefix + "Pull";
        DefaultMQProducer p = producer(prefix + "_pg");
        MessageQueue first = null;
        for (int i = 0; i < 5; i++) {
            Message m = msg(t, "T", "p-" + i, "p-" + i);
            try {
                SendResult r = p.send(m, (mqs, mm, arg) -> mqs.get(0), null);
                first = r.getMessageQueue();
                sent("send", r, "key", m.getKeys());
            } catch (Exception e) {
                error("send", e, "key", m.getKeys());
            }
        }
        p.shutdown();
        DefaultLitePullConsumer lite = config(new DefaultLitePullConsumer(prefix + "_lg"));
        lite.setAutoCommit(false);
        lite.start();
        try {
            Collection<MessageQueue> mqs = lite.fetchMessageQueues(t);
            out("lite.queues", "n", mqs.size());
            lite.assign(Collections.singletonList(first));
            lite.seek(first, 2);
            pollFrom(lite, 2, 3, "lite.poll");
            lite.seek(first, 4);
            pollFrom(lite, 4, 1, "lite.poll.again");
        } finally {
            lite.shutdown();
        }
        DefaultMQPullConsumer pc = config(new DefaultMQPullConsumer(prefix + "_pc"));
        pc.start();
        try {
            for (long off : new long[] {0, 3, 5, 9}) {
                PullResult r = pc.pull(first, "*", off, 32);
                List<Object> ms = new ArrayList<>();
                if (r.getMsgFoundList() != null) {
                    for (MessageExt m : r.getMsgFoundList()) {
                        ms.add(seen(m));
                    }
                }
                out("pull", "offset", off, "status", r.getPullStatus().name(), "next",
                    r.getNextBeginOffset(), "min", r.getMinOffset(), "max", r.getMaxOffset(),
                    "msgs", ms);
            }
            out("offsets", "min", pc.minOffset(first), "max", pc.maxOffset(first));
        } finally {
            pc.shutdown();
        }
    }

    /** Queries by offset message id, by key and by unique key. */
    static void query() throws Exception {
        String t = prefix + "Query";
        DefaultMQProducer p = producer(prefix + "_pg");
        try {
            long begin = System.currentTimeMillis() - 60000;
            List<SendResult> rs = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                SendResult r = p.send(msg(t, "T", "qk-" + i + " qk-all", "query-" + i));
                rs.add(r);
                sent("send", r, "key", "qk-" + i);
            }
            Thread.sleep(2000);  // the broker's index is written after the put
            long end = System.currentTimeMillis() + 60000;
            for (SendResult r : rs) {
                try {
                    out("view.offsetId", "m", seen(p.viewMessage(t, r.getOffsetMsgId())));
                } catch (Exception e) {
                    error("view.offsetId", e);
                }
                try {
                    out("view.uniqKey", "m", seen(p.viewMessage(t, r.getMsgId())));
                } catch (Exception e) {
                    error("view.uniqKey", e);
                }
            }
            for (String key : new String[] {"qk-1", "qk-all", "qk-none"}) {
                try {
                    QueryResult q = p.queryMessage(t, key, 32, begin, end);
                    List<Object> ms = new ArrayList<>();
                    List<MessageExt> l = new ArrayList<>(q.getMessageList());
                    l.sort(Comparator.comparing(m -> new String(m.getBody(), StandardCharsets.UTF_8)));
                    for (MessageExt m : l) {
                        ms.add(seen(m));
                    }
                    out("query.key", "key", key, "msgs", ms);
                } catch (Exception e) {
                    error("query.key", e, "key", key);
                }
            }
        } finally {
            p.shutdown();
        }
    }

    /**
     * A started concurrent push consumer of GROUP on TOPIC (EXPR) that prints each message as
     * STEP and counts EACH down once per message.
     */
    static DefaultMQPushConsumer recording(String group, String topic, String expr, String step,
                                           CountDownLatch each) throws Exception {
        DefaultMQPushConsumer c = pushConsumer(group);
        c.subscribe(topic, expr);
        c.registerMessageListener((MessageListenerConcurrently) (list, ctx) -> {
            for (MessageExt m : list) {
                out(step, "m", seen(m));
                each.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        return c;
    }

    /** Transactions: commit, rollback, unknown then checked back (commit, rollback). */
    static void transaction() throws Exception {
        String t = prefix + "Tx";
        Map<String, AtomicInteger> checks = new ConcurrentHashMap<>();
        TransactionMQProducer p = config(new TransactionMQProducer(prefix + "_txg"));
        p.setSendMsgTimeout(15000);
        CountDownLatch checked = new CountDownLatch(2);
        p.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message m, Object arg) {
                String k = m.getKeys();
                if (k.startsWith("tx-commit")) {
                    return LocalTransactionState.COMMIT_MESSAGE;
                }
                if (k.startsWith("tx-rollback")) {
                    return LocalTransactionState.ROLLBACK_MESSAGE;
                }
                return LocalTransactionState.UNKNOW;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt m) {
                String k = m.getKeys();
                int n = checks.computeIfAbsent(k, x -> new AtomicInteger()).incrementAndGet();
                // a transaction already ended whose op record the broker did not have yet
                // (a busy machine; 5.x writes op records in batches), or one checked again
                // before the broker had the first answer, is timing: it is answered UNKNOW,
                // so that the ending already on its way stays the only one
                if (!k.startsWith("tx-unknown")) {
                    out("check.ended", "key", k);
                    return LocalTransactionState.UNKNOW;
                }
                if (n > 1) {
                    out("check.again", "key", k, "n", n);
                    return LocalTransactionState.UNKNOW;
                }
                out("check", "key", k, "n", n, "m", seen(m));
                checked.countDown();
                return k.endsWith("-commit") ? LocalTransactionState.COMMIT_MESSAGE
                    : LocalTransactionState.ROLLBACK_MESSAGE;
            }
        });
        p.start();
        try {
            for (String k : new String[] {"tx-commit", "tx-rollback", "tx-unknown-commit",
                "tx-unknown-rollback"}) {
                try {
                    TransactionSendResult r = p.sendMessageInTransaction(msg(t, "TX", k, k), null);
                    out("send", "key", k, "status", r.getSendStatus().name(), "state",
                        r.getLocalTransactionState().name());
                } catch (Exception e) {
                    error("send", e, "key", k);
                }
            }
            CountDownLatch got = new CountDownLatch(2);
            Set<String> seenKeys = ConcurrentHashMap.newKeySet();
            DefaultMQPushConsumer c = pushConsumer(prefix + "_txc");
            c.subscribe(t, "*");
            c.registerMessageListener((MessageListenerConcurrently) (list, ctx) -> {
                for (MessageExt m : list) {
                    out("deliver", "m", seen(m));
                    if (seenKeys.add(m.getKeys())) {
                        got.countDown();
                    }
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            c.start();
            out("checked", "both", await(checked, 120000));
            out("delivered", "both", await(got, 120000));
            Thread.sleep(3000);  // a rolled back message is never delivered
            c.shutdown();
        } finally {
            p.shutdown();
        }
    }

    /**
     * A started producer of the {@code _txdg} transaction group (the txdies and txrevive flows):
     * it leaves every local transaction UNKNOW and answers a check-back with {@code check}.
     */
    static TransactionMQProducer unknownTxProducer(
            Function<MessageExt, LocalTransactionState> check) throws MQClientException {
        TransactionMQProducer p = config(new TransactionMQProducer(prefix + "_txdg"));
        p.setSendMsgTimeout(15000);
        p.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message m, Object arg) {
                return LocalTransactionState.UNKNOW;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt m) {
                return check.apply(m);
            }
        });
        p.start();
        return p;
    }

    /**
     * A transaction whose producer dies before the broker checks it back: the producer sends
     * the half message, leaves it UNKNOW and halts without shutting down.
     */
    static void transactionDies() throws Exception {
        TransactionMQProducer p = unknownTxProducer(m -> {
            out("check.dead", "key", m.getKeys());
            return LocalTransactionState.UNKNOW;
        });
        TransactionSendResult r = p.sendMessageInTransaction(
            msg(prefix + "TxDies", "TX", "tx-dies", "tx-dies"), null);
        out("send", "key", "tx-dies", "status", r.getSendStatus().name(), "state",
            r.getLocalTransactionState().name());
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }

    /**
     * A new producer of the dead one's group: the broker's next check-back reaches it, it
     * commits, and a consumer gets the message.
     */
    static void transactionRevives() throws Exception {
        String t = prefix + "TxDies";
        CountDownLatch checked = new CountDownLatch(1);
        TransactionMQProducer p = unknownTxProducer(m -> {
            if (checked.getCount() > 0) {
                out("check", "key", m.getKeys(), "m", seen(m));
            }
            checked.countDown();
            return LocalTransactionState.COMMIT_MESSAGE;
        });
        try {
            CountDownLatch got = new CountDownLatch(1);
            DefaultMQPushConsumer c = recording(prefix + "_txdc", t, "*", "deliver", got);
            out("checked", "ok", await(checked, 120000));
            out("delivered", "ok", await(got, 120000));
            Thread.sleep(3000);  // the consumed offset is stored before the consumer leaves
            c.shutdown();
        } finally {
            p.shutdown();
        }
    }

    /** Consumers join and leave a group: the queues each holds after each change. */
    static void rebalance() throws Exception {
        String t = prefix + "Rb";
        DefaultMQProducer p = producer(prefix + "_pg");
        List<Message> msgs = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            msgs.add(msg(t, "T", "rb-" + i, "rb-" + i));
        }
        sendEach(p, "send", msgs);
        List<DefaultMQPushConsumer> cs = new ArrayList<>();
        CountDownLatch first = new CountDownLatch(1);
        CountDownLatch all = new CountDownLatch(msgs.size());
        Set<String> keys = ConcurrentHashMap.newKeySet();
        for (int k = 0; k < 2; k++) {
            DefaultMQPushConsumer c = pushConsumer(prefix + "_cg");
            c.subscribe(t, "*");
            final int who = k;
            c.registerMessageListener((MessageListenerConcurrently) (list, ctx) -> {
                for (MessageExt m : list) {
                    out("deliver", "consumer", who, "m", seen(m));
                    first.countDown();
                    if (keys.add(m.getKeys())) {
                        all.countDown();
                    }
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            c.start();
            cs.add(c);
            if (k == 0) {
                out("first", "got", await(first, 60000));
            }
            settle(cs, t, 4);
        }
        cs.get(1).shutdown();
        settle(cs.subList(0, 1), t, 4);
        out("all", "got", await(all, 60000));
        cs.get(0).shutdown();
        p.shutdown();
    }

    /** Wait until the consumers together hold ``want`` queues of ``topic``, each one once. */
    static void settle(List<DefaultMQPushConsumer> cs, String topic, int want)
        throws InterruptedException {
        long end = System.currentTimeMillis() + 60000;
        List<Integer> held = new ArrayList<>();
        while (System.currentTimeMillis() < end) {
            held.clear();
            int total = 0;
            for (DefaultMQPushConsumer c : cs) {
                int n = 0;
                for (MessageQueue mq : c.getDefaultMQPushConsumerImpl().getRebalanceImpl()
                    .getProcessQueueTable().keySet()) {
                    if (mq.getTopic().equals(topic)) {
                        n++;
                    }
                }
                held.add(n);
                total += n;
            }
            if (total == want && !held.contains(0)) {
                break;
            }
            Thread.sleep(200);
        }
        Collections.sort(held);
        out("held", "consumers", cs.size(), "queues", held);
    }

    public static void main(String[] args) throws Exception {
        namesrv = args[0];
        String flow = args[1];
        prefix = args[2];
        try {
            switch (flow) {
                case "produce":
                    produce();
                    break;
                case "retry":
                    consumeRetry();
                    break;
                case "orderly":
                    consumeOrderly();
                    break;
                case "broadcast":
                    broadcast();
                    break;
                case "filter":
                    filter(false);
                    break;
                case "filter5":  // 5.x: CONTAINS, STARTSWITH, ENDSWITH too
                    filter(true);
                    break;
                case "pull":
                    pull();
                    break;
                case "query":
                    query();
                    break;
                case "transaction":
                    transaction();
                    break;
                case "rebalance":
                    rebalance();
                    break;
                case "txdies":
                    transactionDies();
                    break;
                case "txrevive":
                    transactionRevives();
                    break;
                default:
                    System.err.println("no flow " + flow);
                    System.exit(2);
            }
        } catch (Exception e) {
            e.printStackTrace();
            System.out.flush();
            System.exit(2);
        }
        System.out.flush();
        System.exit(0);
    }
}
