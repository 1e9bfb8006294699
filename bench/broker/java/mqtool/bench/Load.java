package mqtool.bench;

import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Timed load from the official RocketMQ Java client.
 *
 * <pre>
 * Load produce NAMESRV TOPIC THREADS PER_THREAD BODY_BYTES BATCH
 * Load consume NAMESRV GROUP TOPIC COUNT
 * </pre>
 *
 * <p>produce: THREADS threads share one producer; each sends PER_THREAD messages synchronously,
 * one at a time (BATCH 1) or in batches of BATCH. One send before the clock starts does the route
 * lookup and connects. consume: a concurrent push consumer from the first offset until COUNT
 * messages came. Prints one JSON line: mode, messages, failed, seconds (first send or consumer
 * start to the last SEND_OK or the COUNT-th message), start and end (epoch ms), firstMs (consume:
 * consumer start to its first message) and cpu (this JVM's CPU seconds in that window).
 */
public final class Load {
    private Load() {
    }

    static double cpu() {
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime() / 1e9;
    }

    static Message msg(String topic, int i, byte[] body) {
        return new Message(topic, "TagA", "bench-" + i, body);
    }

    static void print(String mode, long messages, long failed, long t0, long t1, double cpu,
                      long firstMs, long start, long end) {
        System.out.println("{\"mode\":\"" + mode + "\",\"messages\":" + messages
            + ",\"failed\":" + failed + ",\"seconds\":" + ((t1 - t0) / 1e9)
            + ",\"start\":" + start + ",\"end\":" + end + ",\"firstMs\":" + firstMs
            + ",\"cpu\":" + cpu + "}");
        System.out.flush();
    }

    static int produce(String[] a) throws Exception {
        String namesrv = a[1];
        String topic = a[2];
        int threads = Integer.parseInt(a[3]);
        int perThread = Integer.parseInt(a[4]);
        byte[] body = new byte[Integer.parseInt(a[5])];
        int batch = Integer.parseInt(a[6]);
        java.util.Arrays.fill(body, (byte) 'x');
        DefaultMQProducer p = new DefaultMQProducer("PID-BENCH-" + topic);
        p.setNamesrvAddr(namesrv);
        p.setInstanceName("bench-" + ProcessHandle.current().pid());
        p.setSendMsgTimeout(30000);
        p.setCompressMsgBodyOverHowmuch(Integer.MAX_VALUE);
        p.start();
        AtomicLong failed = new AtomicLong();
        try {
            for (int attempt = 0; ; attempt++) {
                try {
                    p.send(msg(topic, -1, body));
                    break;
                } catch (Exception e) {
                    if (attempt >= 40) {
                        throw e;
                    }
                    Thread.sleep(250);
                }
            }
            CountDownLatch go = new CountDownLatch(1);
            List<Thread> workers = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                final int base = t * perThread;
                Thread w = new Thread(() -> {
                    try {
                        go.await();
                        for (int i = 0; i < perThread; i += batch) {
                            int n = Math.min(batch, perThread - i);
                            SendResult r;
                            if (batch == 1) {
                                r = p.send(msg(topic, base + i, body));
                            } else {
                                List<Message> ms = new ArrayList<>(n);
                                for (int k = 0; k < n; k++) {
                                    ms.add(msg(topic, base + i + k, body));
                                }
                                r = p.send(ms);
                            }
                            if (r.getSendStatus() != SendStatus.SEND_OK) {
                                failed.addAndGet(n);
                            }
                        }
                    } catch (Exception e) {
                        e.printStackTrace();
                        failed.addAndGet(perThread);
                    }
                });
                w.start();
                workers.add(w);
            }
            double c0 = cpu();
            long start = System.currentTimeMillis();
            long t0 = System.nanoTime();
            go.countDown();
            for (Thread w : workers) {
                w.join();
            }
            long t1 = System.nanoTime();
            print(batch == 1 ? "sync" : "batch", (long) threads * perThread, failed.get(), t0, t1,
                  cpu() - c0, -1, start, System.currentTimeMillis());
        } finally {
            p.shutdown();
        }
        return failed.get() == 0 ? 0 : 1;
    }

    static int consume(String[] a) throws Exception {
        String namesrv = a[1];
        String group = a[2];
        String topic = a[3];
        int count = Integer.parseInt(a[4]);
        AtomicInteger got = new AtomicInteger();
        AtomicLong first = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(namesrv);
        c.setInstanceName("bench-" + ProcessHandle.current().pid());
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (list, ctx) -> {
            first.compareAndSet(0, System.nanoTime());
            if (got.addAndGet(list.size()) >= count) {
                done.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        double c0 = cpu();
        long start = System.currentTimeMillis();
        long t0 = System.nanoTime();
        c.start();
        boolean ok = done.await(600, TimeUnit.SECONDS);
        long t1 = System.nanoTime();
        double used = cpu() - c0;
        c.shutdown();
        long firstMs = first.get() == 0 ? -1 : (first.get() - t0) / 1_000_000;
        print("consume", got.get(), ok ? 0 : count - got.get(), t0, t1, used, firstMs, start,
              System.currentTimeMillis());
        return ok ? 0 : 1;
    }

    public static void main(String[] a) throws Exception {
        int rc = "consume".equals(a[0]) ? consume(a) : produce(a);
        System.exit(rc);
    }
}
