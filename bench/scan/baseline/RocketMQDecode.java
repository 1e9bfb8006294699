// RocketMQ's own decoder over a store's commitlog files, one thread: the baseline of
// bench/scan. Compiled by bench_scan.py against rocketmq-common (Maven Central, the version it
// names); nothing of mqtool is on the class path.
//
// Each file is mapped and walked as the broker's CommitLog does (TOTALSIZE, then the next
// record; the BLANK magic or a zero TOTALSIZE ends the file's data); every record is decoded
// by MessageDecoder.decode(ByteBuffer) (body read, not a client: the broker's and the admin
// tools' form; no BODYCRC check). The whole walk is repeated PASSES times in one JVM and each
// pass timed: the first pays for the JIT, the later ones are its steady rate. Each pass maps the
// files on its clock, as any program that reads a store does (its pages are faulted in as it
// walks them), and unmaps them off its clock. Then REWALKS more passes walk the last pass's
// mapping again (its pages already faulted in: what no single reading of a store gets), each
// printed as "rewalk" for comparison, not as the baseline.
//
// Usage: java -cp CLASSPATH RocketMQDecode PASSES FILE...
// Prints one line per pass: "pass <i> <records> <record bytes> <seconds> <cpu seconds>
// <checksum>" (the CPU time is this thread's), then "rewalk <i> ..." alike.
import java.io.RandomAccessFile;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;

import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;

public final class RocketMQDecode {
    private static final int BLANK_MAGIC = 0xCBD43194;
    private static final int REWALKS = 2;
    private static final sun.misc.Unsafe UNSAFE = unsafe();

    private static sun.misc.Unsafe unsafe() {
        try {
            java.lang.reflect.Field f = sun.misc.Unsafe.class.getDeclaredField("theUnsafe");
            f.setAccessible(true);
            return (sun.misc.Unsafe) f.get(null);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    private RocketMQDecode() {
    }

    public static void main(String[] args) throws Exception {
        int passes = Integer.parseInt(args[0]);
        MappedByteBuffer[] maps = new MappedByteBuffer[args.length - 1];
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        for (int pass = 1; pass <= passes; pass++) {
            long t0 = System.nanoTime();
            long c0 = threads.getCurrentThreadCpuTime();
            map(args, maps);
            long[] walked = walk(maps);
            report("pass", pass, walked, t0, c0, threads);
            if (pass < passes) {
                unmap(maps);
            }
        }
        // not the baseline: the last mapping walked again, its pages already faulted in
        for (int pass = 1; pass <= REWALKS; pass++) {
            long t0 = System.nanoTime();
            long c0 = threads.getCurrentThreadCpuTime();
            long[] walked = walk(maps);
            report("rewalk", pass, walked, t0, c0, threads);
        }
        unmap(maps);
    }

    private static void map(String[] args, MappedByteBuffer[] maps) throws Exception {
        for (int i = 1; i < args.length; i++) {
            try (RandomAccessFile f = new RandomAccessFile(args[i], "r")) {
                maps[i - 1] = f.getChannel().map(FileChannel.MapMode.READ_ONLY, 0, f.length());
            }
        }
    }

    private static void unmap(MappedByteBuffer[] maps) {
        for (int i = 0; i < maps.length; i++) {
            UNSAFE.invokeCleaner(maps[i]);  // unmapped now, not when a collection finds it
            maps[i] = null;
        }
    }

    /** Every record of ``maps`` decoded: {records, bytes, a sum of their fields}. */
    private static long[] walk(MappedByteBuffer[] maps) {
        long records = 0;
        long bytes = 0;
        long sum = 0;  // of fields of every decoded message: the work cannot be elided
        for (MappedByteBuffer map : maps) {
            int size = map.limit();
            int p = 0;
            while (p + 8 <= size) {
                int total = map.getInt(p);
                if (total <= 0 || map.getInt(p + 4) == BLANK_MAGIC || p + total > size) {
                    break;
                }
                ByteBuffer record = map.slice(p, total);
                MessageExt m = MessageDecoder.decode(record);
                if (m == null) {
                    throw new IllegalStateException("MessageDecoder refused the record at " + p);
                }
                sum += m.getQueueOffset() + m.getBody().length + m.getTopic().length()
                    + m.getProperties().size() + m.getMsgId().length();
                records++;
                bytes += total;
                p += total;
            }
        }
        return new long[] {records, bytes, sum};
    }

    private static void report(String what, int pass, long[] walked, long t0, long c0,
                               ThreadMXBean threads) {
        double seconds = (System.nanoTime() - t0) / 1e9;
        double cpu = (threads.getCurrentThreadCpuTime() - c0) / 1e9;
        System.out.println(what + " " + pass + " " + walked[0] + " " + walked[1] + " " + seconds
            + " " + cpu + " " + walked[2]);
    }
}
