package mqtool.realmq;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Read a topic from its first offset with the official push consumer until EXPECT distinct
 * messages (queue id and offset) came, or TIMEOUT_MS passed:
 * {@code ConsumeAll NAMESRV TOPIC GROUP EXPECT TIMEOUT_MS}. Prints one JSON line per delivery
 * (every delivery, redeliveries too), acks each; exit 0 when EXPECT were read, 3 on timeout.
 */
public final class ConsumeAll {
    private ConsumeAll() {
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        String group = args[2];
        int expect = Integer.parseInt(args[3]);
        long timeoutMs = Long.parseLong(args[4]);
        Set<String> seen = ConcurrentHashMap.newKeySet();
        CountDownLatch done = new CountDownLatch(1);
        if (expect <= 0) {
            done.countDown();
        }
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("realmq-consume-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        // shutdown waits for the listener calls under way, so the offsets it sends last
        // include the message that completed the count
        consumer.setAwaitTerminationMillisWhenShutdown(5000);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                String line = Json.message(m);
                synchronized (System.out) {
                    System.out.println(line);
                    System.out.flush();
                }
                if (seen.add(m.getQueueId() + "@" + m.getQueueOffset()) && seen.size() >= expect) {
                    done.countDown();
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        boolean all = done.await(timeoutMs, TimeUnit.MILLISECONDS);
        consumer.shutdown();
        System.out.flush();
        System.exit(all ? 0 : 3);
    }
}
