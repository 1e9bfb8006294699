package mqtool.judge;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Map;
import java.util.TreeMap;

import org.apache.rocketmq.broker.offset.ConsumerOffsetManager;

/**
 * The broker's own decoding of a consumerOffset.json text (ConsumerOffsetManager#decode, fastjson):
 * prints one line per table entry, "topic@group queueId offset", sorted, or "error: ..." when
 * the text does not decode.
 */
public class ConsumerOffsetsLoad {
    public static void main(String[] args) throws Exception {
        String text = new String(Files.readAllBytes(Paths.get(args[0])), StandardCharsets.UTF_8);
        ConsumerOffsetManager m = new ConsumerOffsetManager();
        try {
            m.decode(text);
        } catch (RuntimeException e) {
            System.out.println("error: " + e.getClass().getSimpleName());
            return;
        }
        TreeMap<String, String> lines = new TreeMap<>();
        for (Map.Entry<String, ? extends Map<Integer, Long>> e : m.getOffsetTable().entrySet()) {
            for (Map.Entry<Integer, Long> q : e.getValue().entrySet()) {
                lines.put(e.getKey() + " " + q.getKey(), e.getKey() + " " + q.getKey() + " " + q.getValue());
            }
        }
        for (String line : lines.values()) {
            System.out.println(line);
        }
    }
}
