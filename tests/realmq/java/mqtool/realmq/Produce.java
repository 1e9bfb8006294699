package mqtool.realmq;

import java.nio.charset.StandardCharsets;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * Send COUNT messages to TOPIC with the official producer, synchronously, one at a time:
 * {@code Produce NAMESRV TOPIC COUNT [PREFIX [TAG]]}. Message i has body PREFIX-i, key PREFIX-i
 * and tag TAG (default: PREFIX "m", TAG "t"). Prints one JSON line per send result; exit 1 when a
 * send is not SEND_OK.
 */
public final class Produce {
    private Produce() {
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        String prefix = args.length > 3 ? args[3] : "m";
        String tag = args.length > 4 ? args[4] : "t";
        DefaultMQProducer producer = new DefaultMQProducer("realmq_producer");
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("realmq-produce-" + ProcessHandle.current().pid());
        producer.setSendMsgTimeout(15000);
        producer.start();
        int failed = 0;
        try {
            for (int i = 0; i < count; i++) {
                String id = prefix + "-" + i;
                Message msg = new Message(topic, tag, id, id.getBytes(StandardCharsets.UTF_8));
                SendResult r = producer.send(msg);
                if (!"SEND_OK".equals(r.getSendStatus().name())) {
                    failed++;
                }
                System.out.println("{\"key\":" + Json.str(id)
                    + ",\"status\":" + Json.str(r.getSendStatus().name())
                    + ",\"msgId\":" + Json.str(r.getMsgId())
                    + ",\"offsetMsgId\":" + Json.str(r.getOffsetMsgId())
                    + ",\"queueId\":" + r.getMessageQueue().getQueueId()
                    + ",\"queueOffset\":" + r.getQueueOffset() + "}");
            }
        } finally {
            producer.shutdown();
        }
        System.out.flush();
        System.exit(failed == 0 ? 0 : 1);
    }
}
