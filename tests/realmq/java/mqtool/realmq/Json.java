package mqtool.realmq;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageExt;

/** JSON text for the test programs' output lines (no JSON library: each version ships another). */
final class Json {
    private Json() {
    }

    static String str(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    /** One consumed message: where it is, what a consumer reads of it. */
    static String message(MessageExt m) {
        StringBuilder props = new StringBuilder("{");
        for (Map.Entry<String, String> e : new java.util.TreeMap<>(m.getProperties()).entrySet()) {
            if (props.length() > 1) {
                props.append(',');
            }
            props.append(str(e.getKey())).append(':').append(str(e.getValue()));
        }
        props.append('}');
        return "{\"msgId\":" + str(m.getMsgId())
            + ",\"offsetMsgId\":" + str(m instanceof MessageClientExt
                ? ((MessageClientExt) m).getOffsetMsgId() : m.getMsgId())
            + ",\"topic\":" + str(m.getTopic())
            + ",\"queueId\":" + m.getQueueId()
            + ",\"queueOffset\":" + m.getQueueOffset()
            + ",\"commitLogOffset\":" + m.getCommitLogOffset()
            + ",\"tags\":" + str(m.getTags())
            + ",\"keys\":" + str(m.getKeys())
            + ",\"reconsumeTimes\":" + m.getReconsumeTimes()
            + ",\"storeTimestamp\":" + m.getStoreTimestamp()
            + ",\"body\":" + str(new String(m.getBody(), StandardCharsets.UTF_8))
            + ",\"properties\":" + props + "}";
    }
}
