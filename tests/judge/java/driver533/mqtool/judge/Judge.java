/*
 * mqtool judge driver for RocketMQ 5.3.3: what its store API does differently from 4.9.7's (the
 * consume queue behind ConsumeQueueInterface and CqUnit, checkMessageAndReturnSize, the store's
 * constructor, the read-ahead and timer-wheel settings). 5.x's ScheduleMessageService and
 * TimerMessageStore live in the broker, so delay offsets and timer files are not judged here.
 * Everything else, and what the judge checks, is in ../../../common/mqtool/judge/JudgeBase.java.
 */
package mqtool.judge;

import java.io.File;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.store.CommitLog;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.DispatchRequest;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.queue.ConsumeQueueInterface;
import org.apache.rocketmq.store.queue.CqUnit;

public final class Judge extends JudgeBase {
    private Judge() {
    }

    public static void main(String[] args) {
        runMain(args, new Judge());
    }

    @Override
    protected List<QueueView> queues(DefaultMessageStore store) {
        List<QueueView> all = new ArrayList<>();
        for (ConcurrentMap<Integer, ConsumeQueueInterface> m : store.getConsumeQueueTable().values()) {
            for (ConsumeQueueInterface q : m.values()) {
                all.add(view(q));
            }
        }
        return all;
    }

    @Override
    protected QueueView findQueue(DefaultMessageStore store, String topic, int queueId) {
        ConsumeQueueInterface q = store.findConsumeQueue(topic, queueId);
        return q == null ? null : view(q);
    }

    private static QueueView view(ConsumeQueueInterface q) {
        return new QueueView(q.getTopic(), q.getQueueId(), q::getMinOffsetInQueue, q::getMaxOffsetInQueue,
            q::getMaxPhysicOffset, o -> {
                CqUnit u = q.get(o);
                return u == null ? null : new long[] {u.getPos(), u.getSize(), u.getTagsCode()};
            });
    }

    @Override
    protected DispatchRequest check(CommitLog cl, ByteBuffer bb) {
        return cl.checkMessageAndReturnSize(bb, true, false, true);
    }

    @Override
    protected DefaultMessageStore newStore(MessageStoreConfig cfg) throws Exception {
        return new DefaultMessageStore(cfg, null, null, new BrokerConfig(), new ConcurrentHashMap<>());
    }

    @Override
    protected void configure(MessageStoreConfig cfg) {
        cfg.setDataReadAheadEnable(true);
        cfg.setTimerWheelEnable(false);
    }

    @Override
    protected void beforeLoad(File root, Map<String, Object> before) {
    }

    @Override
    protected void afterLoad(DefaultMessageStore store, Map<String, Object> after) {
    }
}
