/*
 * mqtool judge driver for RocketMQ 4.9.7: what its store API does differently from 5.3.3's (the
 * consume queue, checkMessageAndReturnSize, the store's constructor, RocketMQ's inner logger) and
 * what only 4.9.7's store holds: the ScheduleMessageService's delay offsets. Everything else, and
 * what the judge checks, is in ../../../common/mqtool/judge/JudgeBase.java.
 */
package mqtool.judge;

import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentMap;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.logging.InternalLoggerFactory;
import org.apache.rocketmq.logging.inner.Level;
import org.apache.rocketmq.logging.inner.Logger;
import org.apache.rocketmq.logging.inner.LoggingBuilder;
import org.apache.rocketmq.store.CommitLog;
import org.apache.rocketmq.store.ConsumeQueue;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.DispatchRequest;
import org.apache.rocketmq.store.SelectMappedBufferResult;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.schedule.DelayOffsetSerializeWrapper;

public final class Judge extends JudgeBase {
    private Map<Integer, Long> delayOnDisk = null;
    private String delayState = "absent";

    private Judge() {
    }

    public static void main(String[] args) {
        InternalLoggerFactory.setCurrentLoggerType(InternalLoggerFactory.LOGGER_INNER);
        Logger root = Logger.getRootLogger();
        root.addAppender(LoggingBuilder.newAppenderBuilder().withConsoleAppender(LoggingBuilder.SYSTEM_ERR)
            .withLayout(LoggingBuilder.newLayoutBuilder().withDefaultLayout().build()).build());
        root.setLevel(Level.INFO);
        runMain(args, new Judge());
    }

    @Override
    protected List<QueueView> queues(DefaultMessageStore store) {
        List<QueueView> all = new ArrayList<>();
        for (ConcurrentMap<Integer, ConsumeQueue> m : store.getConsumeQueueTable().values()) {
            for (ConsumeQueue q : m.values()) {
                all.add(view(q));
            }
        }
        return all;
    }

    @Override
    protected QueueView findQueue(DefaultMessageStore store, String topic, int queueId) {
        ConsumeQueue q = store.findConsumeQueue(topic, queueId);
        return q == null ? null : view(q);
    }

    private static QueueView view(ConsumeQueue q) {
        return new QueueView(q.getTopic(), q.getQueueId(), q::getMinOffsetInQueue, q::getMaxOffsetInQueue,
            q::getMaxPhysicOffset, o -> {
                SelectMappedBufferResult u = q.getIndexBuffer(o);
                if (u == null) {
                    return null;
                }
                try {
                    ByteBuffer b = u.getByteBuffer();
                    long phy = b.getLong();
                    long size = b.getInt();
                    return new long[] {phy, size, b.getLong()};
                } finally {
                    u.release();
                }
            });
    }

    @Override
    protected DispatchRequest check(CommitLog cl, ByteBuffer bb) {
        return cl.checkMessageAndReturnSize(bb, true, true);
    }

    @Override
    protected DefaultMessageStore newStore(MessageStoreConfig cfg) throws Exception {
        return new DefaultMessageStore(cfg, null, null, new BrokerConfig());
    }

    @Override
    protected void configure(MessageStoreConfig cfg) {
    }

    @Override
    protected void beforeLoad(File root, Map<String, Object> before) throws IOException {
        File delayFile = new File(new File(root, "config"), "delayOffset.json");
        if (delayFile.isFile()) {
            String text = new String(Files.readAllBytes(delayFile.toPath()), StandardCharsets.UTF_8);
            delayState = text.isEmpty() ? "empty" : "unreadable";
            try {
                DelayOffsetSerializeWrapper w = DelayOffsetSerializeWrapper.fromJson(text, DelayOffsetSerializeWrapper.class);
                if (w != null) {
                    delayOnDisk = new TreeMap<>(w.getOffsetTable());
                    delayState = "read";
                }
            } catch (RuntimeException e) {
                delayState = "unreadable";
            }
        }
        before.put("delayOffsetJson", delayState);
        before.put("delayOffsets", delayOnDisk);
    }

    @Override
    protected void afterLoad(DefaultMessageStore store, Map<String, Object> after) {
        // delay offsets: what ScheduleMessageService loaded (the .bak when the file is empty or
        // unreadable) and corrected to its queues' bounds (correctDelayOffset)
        DelayOffsetSerializeWrapper loadedDelay = DelayOffsetSerializeWrapper.fromJson(
            store.getScheduleMessageService().encode(), DelayOffsetSerializeWrapper.class);
        Map<Integer, Long> delayLoaded = loadedDelay == null ? new TreeMap<>() : new TreeMap<>(loadedDelay.getOffsetTable());
        after.put("delayOffsets", delayLoaded);
        if (!delayState.equals("read") && !delayState.equals("absent")) {
            action("config-from-bak", "config/delayOffset.json", 0,
                "delayOffset.json is " + delayState + ": the broker loaded config/delayOffset.json.bak");
        } else if (delayOnDisk != null && !delayOnDisk.equals(delayLoaded)) {
            for (Map.Entry<Integer, Long> e : delayOnDisk.entrySet()) {
                Long now = delayLoaded.get(e.getKey());
                if (!e.getValue().equals(now)) {
                    action("delay-offset-corrected", "config/delayOffset.json", -1,
                        "level " + e.getKey() + ": " + e.getValue() + " on disk, " + now + " after load"
                            + " (correctDelayOffset clamps to the SCHEDULE_TOPIC_XXXX queue's bounds)");
                }
            }
        }
    }
}
