/*
 * mqtool judge driver, the part both RocketMQ versions share (tests/judge/java/driver for 4.9.7,
 * driver533 for 5.3.3 extend it with what their store API does differently: the consume-queue
 * API, checkMessageAndReturnSize, the store's constructor, 4.9.7's delay offsets). It opens a COPY
 * of a RocketMQ store with RocketMQ's own DefaultMessageStore
 * (rocketmq-store from Maven Central, see tests/judge/rocketmq_judge.py) and reports, as JSON on stdout,
 * what the broker's own code did with it:
 *
 *   - load(): the broker's recovery (normal, or abnormal when the abort file is present). Anything
 *     it cut is "truncation": commitlog bytes past the recovered max offset, commitlog, consume-queue
 *     or index files it deleted, consume-queue units it dropped.
 *   - start(): as a SLAVE (so the schedule service writes nothing), HA on an ephemeral port. The
 *     bytes the reput service must dispatch at start are reported (consume queues behind the log).
 *   - every consume-queue unit, min..max of every queue, read with getMessage(): must be FOUND and
 *     decode (MessageDecoder) to the same topic, queueId and queue offset;
 *   - every record of the commitlog, walked with CommitLog.checkMessageAndReturnSize (CRC on):
 *     must parse, must have its consume-queue unit (normal and committed transactional records),
 *     and each of its index keys (UNIQ_KEY and KEYS tokens, as IndexService.buildIndex puts them)
 *     must be found by queryMessage(topic, key);
 *   - optional --keys FILE: lines "TOPIC<TAB>KEY" that queryMessage must find.
 *
 * Verdict: "clean" (nothing cut, nothing changed, everything resolves), "recovered-without-loss" (the
 * broker changed something, e.g. dropped an all-zero pre-allocated file or an index file it then
 * re-indexed, but every record, unit and key is there), "not-clean" (something cut or unresolved).
 * Exit status: 0 = clean, 1 = any other verdict, 2 = usage error or crash of the judge. The store directory given is WRITTEN by the broker code (abort, lock, checkpoint,
 * config): always pass a throw-away copy.
 */
package mqtool.judge;

import java.io.File;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.lang.reflect.Array;
import java.util.Arrays;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.LongFunction;
import java.util.function.LongSupplier;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.sysflag.MessageSysFlag;
import org.apache.rocketmq.store.CommitLog;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.DispatchRequest;
import org.apache.rocketmq.store.GetMessageResult;
import org.apache.rocketmq.store.GetMessageStatus;
import org.apache.rocketmq.store.QueryMessageResult;
import org.apache.rocketmq.store.SelectMappedBufferResult;
import org.apache.rocketmq.store.config.BrokerRole;
import org.apache.rocketmq.store.config.MessageStoreConfig;

public abstract class JudgeBase {
    /** One consume queue as both store APIs show it (each driver builds it from its own type). */
    protected static final class QueueView {
        private final String topic;
        private final int queueId;
        private final LongSupplier min;
        private final LongSupplier max;
        private final LongSupplier maxPhysicOffset;
        private final LongFunction<long[]> unit;

        /** unit: the unit at a queue offset as {phy, size, tagsCode}, or null when unreadable. */
        protected QueueView(String topic, int queueId, LongSupplier min, LongSupplier max,
                            LongSupplier maxPhysicOffset, LongFunction<long[]> unit) {
            this.topic = topic;
            this.queueId = queueId;
            this.min = min;
            this.max = max;
            this.maxPhysicOffset = maxPhysicOffset;
            this.unit = unit;
        }

        String topic() {
            return topic;
        }

        int queueId() {
            return queueId;
        }

        long min() {
            return min.getAsLong();
        }

        long max() {
            return max.getAsLong();
        }

        long maxPhysicOffset() {
            return maxPhysicOffset.getAsLong();
        }

        long[] unit(long o) {
            return unit.apply(o);
        }
    }

    /** Every loaded consume queue. */
    protected abstract List<QueueView> queues(DefaultMessageStore store);

    /** The consume queue of topic/queueId, or null. */
    protected abstract QueueView findQueue(DefaultMessageStore store, String topic, int queueId);

    /** CommitLog.checkMessageAndReturnSize with the CRC check on, reading the body. */
    protected abstract DispatchRequest check(CommitLog cl, ByteBuffer bb);

    /** The store on cfg (each version's constructor). */
    protected abstract DefaultMessageStore newStore(MessageStoreConfig cfg) throws Exception;

    /** Version-specific settings, after the common ones. */
    protected abstract void configure(MessageStoreConfig cfg);

    /** What the version reads from disk before load (4.9.7: delayOffset.json). */
    protected abstract void beforeLoad(File root, Map<String, Object> before) throws IOException;

    /** What the version checks after load (4.9.7: the delay offsets the schedule service loaded). */
    protected abstract void afterLoad(DefaultMessageStore store, Map<String, Object> after);

    private static final int BLANK_MAGIC_CODE = -875286124;
    private static final int MAX_LISTED = 50;
    private static final int QUERY_MAX = 100_000;

    private final Map<String, Object> out = new LinkedHashMap<>();
    private final List<Map<String, Object>> problems = new ArrayList<>();
    private final List<Map<String, Object>> actions = new ArrayList<>();
    private int problemCount = 0;


    /** A change the broker made that loses nothing (an all-zero file dropped, an index rebuilt). */
    protected final void action(String kind, String file, long offset, String detail) {
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("kind", kind);
        p.put("file", file);
        p.put("offset", offset);
        p.put("detail", detail);
        actions.add(p);
    }

    protected final void problem(String kind, String file, long offset, String detail) {
        problemCount++;
        if (problems.size() < MAX_LISTED * 4) {
            Map<String, Object> p = new LinkedHashMap<>();
            p.put("kind", kind);
            p.put("file", file);
            p.put("offset", offset);
            p.put("detail", detail);
            problems.add(p);
        }
    }

    private static String usage() {
        return "usage: Judge --store COPY_DIR [--hash-slots N] [--index-num N] [--delay-levels \"1s 5s ...\"]"
            + " [--keys FILE] [--commitlog-file-size N] [--no-start]";
    }

    /** The drivers' main: parse args, judge, print the JSON verdict, exit 0/1/2. */
    protected static void runMain(String[] args, JudgeBase judge) {
        Map<String, String> opt = new LinkedHashMap<>();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.equals("--no-start")) {
                opt.put(a, "true");
            } else if (a.startsWith("--") && i + 1 < args.length) {
                opt.put(a, args[++i]);
            } else {
                System.err.println("judge: unexpected argument " + a + "\n" + usage());
                System.exit(2);
            }
        }
        if (!opt.containsKey("--store")) {
            System.err.println(usage());
            System.exit(2);
        }
        int rc;
        try {
            rc = judge.run(opt);
        } catch (UsageError e) {
            System.err.println("judge: " + e.getMessage());
            rc = 2;
        } catch (Throwable e) {
            e.printStackTrace();
            rc = 2;
        }
        System.out.flush();
        // the store's service threads are not all daemons; leave explicitly
        Runtime.getRuntime().halt(rc);
    }

    private static final class UsageError extends Exception {
        UsageError(String m) {
            super(m);
        }
    }

    private static File[] sortedFiles(File dir) {
        File[] files = dir.listFiles(File::isFile);
        if (files == null) {
            return new File[0];
        }
        Arrays.sort(files);
        return files;
    }

    /** Global position just after the last non-zero byte of a commitlog-like file set, or -1. */
    private static long lastNonZeroEnd(File[] files) throws IOException {
        long end = -1;
        for (File f : files) {
            long base;
            try {
                base = Long.parseLong(f.getName());
            } catch (NumberFormatException e) {
                continue;
            }
            long at = lastNonZero(f);
            if (at >= 0) {
                end = Math.max(end, base + at + 1);
            }
        }
        return end;
    }

    /** In-file position of the last non-zero byte (read backwards in 1 MiB chunks), or -1. */
    private static long lastNonZero(File f) throws IOException {
        try (RandomAccessFile raf = new RandomAccessFile(f, "r")) {
            byte[] buf = new byte[1 << 20];
            long hi = raf.length();
            while (hi > 0) {
                int n = (int) Math.min(buf.length, hi);
                long lo = hi - n;
                raf.seek(lo);
                raf.readFully(buf, 0, n);
                for (int i = n - 1; i >= 0; i--) {
                    if (buf[i] != 0) {
                        return lo + i;
                    }
                }
                hi = lo;
            }
        }
        return -1;
    }

    private static int commonSize(File[] files, String what) throws UsageError {
        int size = -1;
        for (File f : files) {
            long len = f.length();
            if (size == -1) {
                size = (int) len;
            } else if (len != size) {
                throw new UsageError(what + " files have different sizes (" + size + " and " + len + "): " + f);
            }
        }
        return size;
    }

    private int run(Map<String, String> opt) throws Exception {
        File root = new File(opt.get("--store")).getAbsoluteFile();
        File clDir = new File(root, "commitlog");
        File cqDir = new File(root, "consumequeue");
        File idxDir = new File(root, "index");
        if (!clDir.isDirectory()) {
            throw new UsageError("not a store root (no commitlog/): " + root);
        }

        // ---- before: what is on disk ----
        File[] clFiles = sortedFiles(clDir);
        // --commitlog-file-size: the broker's mappedFileSizeCommitLog when the files' sizes differ
        // (RocketMQ's own load then decides about them)
        int clSize = opt.containsKey("--commitlog-file-size")
            ? Integer.parseInt(opt.get("--commitlog-file-size")) : commonSize(clFiles, "commitlog");
        if (clSize <= 0) {
            throw new UsageError("no commitlog files in " + clDir);
        }
        int cqSize = -1;
        Map<String, Long> cqRawUnits = new TreeMap<>();
        Map<String, List<String>> cqFilesBefore = new TreeMap<>();
        File[] topics = cqDir.listFiles(File::isDirectory);
        if (topics != null) {
            Arrays.sort(topics);
            for (File t : topics) {
                File[] qs = t.listFiles(File::isDirectory);
                if (qs == null) {
                    continue;
                }
                for (File q : qs) {
                    File[] fs = sortedFiles(q);
                    for (File f : fs) {
                        if (cqSize == -1) {
                            cqSize = (int) f.length();
                        } else if (f.length() != cqSize) {
                            throw new UsageError("consume-queue files have different sizes: " + f);
                        }
                    }
                    String key = t.getName() + "/" + q.getName();
                    long end = lastNonZeroEnd(fs);
                    cqRawUnits.put(key, end <= 0 ? 0 : (end + 19) / 20);
                    List<String> names = new ArrayList<>();
                    for (File f : fs) {
                        names.add(f.getName());
                    }
                    cqFilesBefore.put(key, names);
                }
            }
        }
        List<String> idxBefore = new ArrayList<>();
        long idxSize = -1;
        for (File f : sortedFiles(idxDir)) {
            idxBefore.add(f.getName());
            idxSize = f.length();
        }
        boolean abortBefore = new File(root, "abort").exists();
        long clRawEnd = lastNonZeroEnd(clFiles);
        boolean[] clFileNonZero = new boolean[clFiles.length];
        for (int i = 0; i < clFiles.length; i++) {
            clFileNonZero[i] = lastNonZero(clFiles[i]) >= 0;
        }

        Map<String, Object> before = new LinkedHashMap<>();
        beforeLoad(root, before);
        before.put("commitlogFileSize", clSize);
        before.put("commitlogFiles", clFiles.length);
        before.put("commitlogNonZeroEnd", clRawEnd);
        before.put("consumeQueueFileSize", cqSize);
        before.put("consumeQueueUnitsOnDisk", cqRawUnits);
        before.put("indexFiles", idxBefore);
        before.put("abortFile", abortBefore);
        out.put("before", before);

        // ---- the broker's configuration for this store ----
        MessageStoreConfig cfg = new MessageStoreConfig();
        cfg.setStorePathRootDir(root.getPath());
        cfg.setStorePathCommitLog(clDir.getPath());
        cfg.setMappedFileSizeCommitLog(clSize);
        if (cqSize > 0) {
            cfg.setMappedFileSizeConsumeQueue(cqSize);
        }
        int slots = 5_000_000;
        int num = 20_000_000;
        String indexGeometry = "broker default";
        if (opt.containsKey("--hash-slots") || opt.containsKey("--index-num")) {
            slots = Integer.parseInt(opt.getOrDefault("--hash-slots", "5000000"));
            num = Integer.parseInt(opt.getOrDefault("--index-num", "20000000"));
            indexGeometry = "given";
        } else if (idxSize >= 0 && idxSize != 40L + 4L * slots + 20L * num && (idxSize - 40) % 84 == 0) {
            // not the default: assume the usual maxIndexNum = 4 x maxHashSlotNum (40 + 4s + 20 * 4s)
            slots = (int) ((idxSize - 40) / 84);
            num = 4 * slots;
            indexGeometry = "inferred from the file size (maxIndexNum = 4 x maxHashSlotNum)";
        }
        if (idxSize >= 0 && idxSize != 40L + 4L * slots + 20L * num) {
            throw new UsageError("index files are " + idxSize + " bytes, not 40 + 4*" + slots + " + 20*" + num
                + ": pass --hash-slots and --index-num");
        }
        cfg.setMaxHashSlotNum(slots);
        cfg.setMaxIndexNum(num);
        if (opt.containsKey("--delay-levels")) {
            cfg.setMessageDelayLevel(opt.get("--delay-levels"));
        }
        configure(cfg);
        cfg.setCheckCRCOnRecover(true);
        cfg.setMessageIndexEnable(true);
        cfg.setBrokerRole(BrokerRole.SLAVE);
        cfg.setHaListenPort(0);
        cfg.setDiskFallRecorded(false);
        cfg.setFileReservedTime(1_000_000);
        cfg.setDiskMaxUsedSpaceRatio(95);
        cfg.setWarmMapedFileEnable(false);
        cfg.setTransientStorePoolEnable(false);
        cfg.setEnableDLegerCommitLog(false);
        cfg.setMaxMsgsNumBatch(QUERY_MAX);
        Map<String, Object> conf = new LinkedHashMap<>();
        conf.put("mappedFileSizeCommitLog", cfg.getMappedFileSizeCommitLog());
        conf.put("mappedFileSizeConsumeQueue", cfg.getMappedFileSizeConsumeQueue());
        conf.put("maxHashSlotNum", slots);
        conf.put("maxIndexNum", num);
        conf.put("indexGeometry", indexGeometry);
        conf.put("messageDelayLevel", cfg.getMessageDelayLevel());
        out.put("config", conf);

        DefaultMessageStore store = newStore(cfg);
        boolean loaded = store.load();
        out.put("recovery", abortBefore ? "abnormal (abort file present)" : "normal");
        if (abortBefore) {
            action("abnormal-recovery", "abort", 0, "the abort file is present: the broker runs recoverAbnormally");
        }
        Map<String, Object> after = new LinkedHashMap<>();
        out.put("loaded", loaded);
        out.put("afterLoad", after);
        if (!loaded) {
            problem("load-failed", "", -1, "DefaultMessageStore.load() returned false (see stderr log)");
            return finish(store, false);
        }
        CommitLog cl = store.getCommitLog();
        long minOff = cl.getMinOffset();
        long maxOff = cl.getMaxOffset();
        after.put("commitlogMinOffset", minOff);
        after.put("commitlogMaxOffset", maxOff);

        // commitlog truncation: files the recovery deleted, non-zero bytes past the recovered end
        List<String> clGone = new ArrayList<>();
        for (int i = 0; i < clFiles.length; i++) {
            File f = clFiles[i];
            if (!f.exists()) {
                clGone.add(f.getName());
                if (clFileNonZero[i]) {
                    problem("commitlog-file-deleted", "commitlog/" + f.getName(), 0,
                        "recovery deleted this commitlog file, which held non-zero bytes");
                } else {
                    action("commitlog-zero-file-deleted", "commitlog/" + f.getName(), 0,
                        "recovery deleted this all-zero (pre-allocated) commitlog file");
                }
            }
        }
        after.put("commitlogFilesDeleted", clGone);
        long cut = 0;
        if (clRawEnd > maxOff) {
            boolean blankTail = false;
            File last = new File(clDir, String.format("%020d", maxOff - maxOff % clSize));
            int pos = (int) (maxOff % clSize);
            if (last.exists() && pos + 8 <= clSize) {
                try (RandomAccessFile raf = new RandomAccessFile(last, "r")) {
                    raf.seek(pos);
                    int size = raf.readInt();
                    int magic = raf.readInt();
                    blankTail = magic == BLANK_MAGIC_CODE && size == clSize - pos && clRawEnd <= maxOff + 8;
                }
            }
            after.put("commitlogEndsInBlankRecord", blankTail);
            if (!blankTail) {
                cut = clRawEnd - maxOff;
                problem("commitlog-truncated", "commitlog/" + last.getName(), pos,
                    "recovery ended the log at phy " + maxOff + " but non-zero bytes reach phy " + clRawEnd
                        + " (" + cut + " bytes the broker will overwrite)");
            }
        }
        after.put("commitlogBytesCut", cut);

        // consume queues after recovery
        Map<String, Object> queues = new TreeMap<>();
        long maxCqPhy = minOff;
        for (QueueView q : queues(store)) {
            String key = q.topic() + "/" + q.queueId();
            Map<String, Object> qi = new LinkedHashMap<>();
            qi.put("min", q.min());
            qi.put("max", q.max());
            qi.put("maxPhysicOffset", q.maxPhysicOffset());
            long raw = cqRawUnits.getOrDefault(key, 0L);
            qi.put("unitsOnDiskBefore", raw);
            queues.put(key, qi);
            maxCqPhy = Math.max(maxCqPhy, q.maxPhysicOffset());
            if (q.max() < raw) {
                problem("consumequeue-truncated", "consumequeue/" + key, q.max() * 20,
                    "recovery kept " + q.max() + " units of " + raw + " on disk");
            }
        }
        for (Map.Entry<String, List<String>> e : cqFilesBefore.entrySet()) {
            for (String n : e.getValue()) {
                if (!new File(new File(cqDir, e.getKey()), n).exists()) {
                    problem("consumequeue-file-deleted", "consumequeue/" + e.getKey() + "/" + n, 0,
                        "recovery deleted this consume-queue file");
                }
            }
            if (!queues.containsKey(e.getKey()) && cqRawUnits.getOrDefault(e.getKey(), 0L) > 0) {
                problem("consumequeue-not-loaded", "consumequeue/" + e.getKey(), 0,
                    "the store did not load this queue");
            }
        }
        after.put("consumeQueues", queues);
        List<String> idxAfter = new ArrayList<>();
        for (String n : idxBefore) {
            if (new File(idxDir, n).exists()) {
                idxAfter.add(n);
            } else {
                action("index-file-deleted", "index/" + n, 0,
                    "recovery deleted this index file (its end timestamp is past the checkpoint); the keys it held"
                        + " are only found if the broker re-indexed them");
            }
        }
        after.put("indexFiles", idxAfter);
        after.put("reputBehindBytes", maxOff - maxCqPhy);

        afterLoad(store, after);

        boolean started = false;
        if (!opt.containsKey("--no-start")) {
            store.start();
            started = true;
            out.put("started", true);
            // units the broker's reput service had to dispatch at start: the copy's queues lacked them
            for (QueueView q : queues(store)) {
                String key = q.topic() + "/" + q.queueId();
                Object loadedQ = queues.get(key);
                long had = loadedQ == null ? 0 : (Long) ((Map<?, ?>) loadedQ).get("max");
                if (q.max() > had) {
                    action("units-dispatched-at-start", "consumequeue/" + key, had * 20,
                        "the broker's reput added units " + had + ".." + (q.max() - 1)
                            + " that the store's consume queue lacked");
                }
            }
        }

        walkCommitLog(store, cl, minOff, maxOff, clSize);
        if (started) {
            readEveryUnit(store);
        }
        if (opt.containsKey("--keys")) {
            checkKeyFile(store, new File(opt.get("--keys")));
        }
        return finish(store, started);
    }

    private void walkCommitLog(DefaultMessageStore store, CommitLog cl, long minOff, long maxOff, int clSize) {
        long offset = minOff;
        long messages = 0;
        long cqChecked = 0;
        long keysChecked = 0;
        long blanks = 0;
        long invalid = 0;
        while (offset < maxOff) {
            SelectMappedBufferResult r = cl.getData(offset, offset == 0);
            if (r == null) {
                problem("commitlog-unreadable", fileOf(offset, clSize), offset % clSize,
                    "CommitLog.getData returned nothing at phy " + offset);
                break;
            }
            try {
                ByteBuffer bb = r.getByteBuffer();
                int pos = 0;
                long fileEnd = offset - offset % clSize + clSize;
                boolean rolled = false;
                while (pos < r.getSize() && offset + pos < maxOff) {
                    bb.position(pos);
                    DispatchRequest d = check(cl, bb);
                    if (!d.isSuccess()) {
                        problem("commitlog-record-invalid", fileOf(offset + pos, clSize), (offset + pos) % clSize,
                            "checkMessageAndReturnSize failed inside the recovered range (phy " + (offset + pos)
                                + "); the rest of this file is not walked");
                        invalid++;
                        offset = fileEnd;
                        rolled = true;
                        break;
                    }
                    if (d.getMsgSize() == 0) {
                        blanks++;
                        offset = fileEnd;
                        rolled = true;
                        break;
                    }
                    messages++;
                    cqChecked += checkUnit(store, d, clSize);
                    keysChecked += checkKeys(store, d, clSize);
                    pos += d.getMsgSize();
                }
                if (!rolled) {
                    offset += pos;
                    if (pos == 0) {
                        break;
                    }
                }
            } finally {
                r.release();
            }
        }
        Map<String, Object> w = new LinkedHashMap<>();
        w.put("messages", messages);
        w.put("blankRecords", blanks);
        w.put("invalidRecords", invalid);
        w.put("consumeQueueUnitsMatched", cqChecked);
        w.put("indexKeysFound", keysChecked);
        out.put("commitlogWalk", w);
    }

    private static String fileOf(long phy, int clSize) {
        return "commitlog/" + String.format("%020d", phy - phy % clSize);
    }

    private int checkUnit(DefaultMessageStore store, DispatchRequest d, int clSize) {
        int tran = MessageSysFlag.getTransactionValue(d.getSysFlag());
        if (tran != MessageSysFlag.TRANSACTION_NOT_TYPE && tran != MessageSysFlag.TRANSACTION_COMMIT_TYPE) {
            return 0;
        }
        long phy = d.getCommitLogOffset();
        QueueView q = findQueue(store, d.getTopic(), d.getQueueId());
        long qo = d.getConsumeQueueOffset();
        String where = d.getTopic() + "/" + d.getQueueId() + " offset " + qo;
        if (q == null || qo < q.min() || qo >= q.max()) {
            problem("message-without-unit", fileOf(phy, clSize), phy % clSize,
                "no consume-queue unit " + where + " for the record at phy " + phy);
            return 0;
        }
        long[] u = q.unit(qo);
        if (u == null) {
            problem("message-without-unit", fileOf(phy, clSize), phy % clSize, "unit " + where + " not readable");
            return 0;
        }
        if (u[0] != phy || u[1] != d.getMsgSize()) {
            problem("unit-mismatch", fileOf(phy, clSize), phy % clSize,
                "unit " + where + " holds phy " + u[0] + " size " + u[1] + ", the record is phy " + phy
                    + " size " + d.getMsgSize());
            return 0;
        }
        return 1;
    }

    private int checkKeys(DefaultMessageStore store, DispatchRequest d, int clSize) {
        if (MessageSysFlag.getTransactionValue(d.getSysFlag()) == MessageSysFlag.TRANSACTION_ROLLBACK_TYPE) {
            return 0;
        }
        List<String> keys = new ArrayList<>();
        if (d.getUniqKey() != null) {
            keys.add(d.getUniqKey());
        }
        if (d.getKeys() != null && !d.getKeys().isEmpty()) {
            for (String k : d.getKeys().split(" ")) {
                if (!k.isEmpty()) {
                    keys.add(k);
                }
            }
        }
        int found = 0;
        long phy = d.getCommitLogOffset();
        for (String k : keys) {
            if (queryFinds(store, d.getTopic(), k, phy)) {
                found++;
            } else {
                problem("index-key-missing", fileOf(phy, clSize), phy % clSize,
                    "queryMessage(" + d.getTopic() + ", " + k + ") does not return the record at phy " + phy);
            }
        }
        return found;
    }

    private static boolean queryFinds(DefaultMessageStore store, String topic, String key, long phy) {
        QueryMessageResult r = store.queryMessage(topic, key, QUERY_MAX, 0, Long.MAX_VALUE);
        boolean hit = false;
        for (ByteBuffer b : r.getMessageBufferList()) {
            MessageExt m = MessageDecoder.decode(b.slice(), false, false);
            if (m != null && (phy < 0 || m.getCommitLogOffset() == phy)) {
                hit = true;
            }
        }
        r.release();
        return hit;
    }

    private void readEveryUnit(DefaultMessageStore store) {
        long units = 0;
        long found = 0;
        for (QueueView q : queues(store)) {
            for (long o = q.min(); o < q.max(); o++) {
                units++;
                String where = "consumequeue/" + q.topic() + "/" + q.queueId();
                GetMessageResult g = store.getMessage("mqtool_judge", q.topic(), q.queueId(), o, 1, null);
                if (g == null || g.getStatus() != GetMessageStatus.FOUND || g.getMessageBufferList().isEmpty()) {
                    problem("unit-unresolved", where, o * 20, "getMessage(offset " + o + ") -> "
                        + (g == null ? "null" : g.getStatus()) + "; the unit holds " + unitText(q, o));
                    if (g != null) {
                        g.release();
                    }
                    continue;
                }
                try {
                    MessageExt msg = MessageDecoder.decode(g.getMessageBufferList().get(0), true, false);
                    if (msg == null || !q.topic().equals(msg.getTopic()) || msg.getQueueId() != q.queueId()
                        || msg.getQueueOffset() != o) {
                        problem("unit-resolves-elsewhere", where, o * 20, "getMessage(offset " + o
                            + ") decodes to " + (msg == null ? "nothing" : msg.getTopic() + "/" + msg.getQueueId()
                            + " offset " + msg.getQueueOffset()) + "; the unit holds " + unitText(q, o));
                    } else {
                        found++;
                    }
                } finally {
                    g.release();
                }
            }
        }
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("units", units);
        r.put("found", found);
        out.put("getMessage", r);
    }

    private static String unitText(QueueView q, long o) {
        long[] u = q.unit(o);
        return u == null ? "nothing readable" : "phy " + u[0] + " size " + u[1] + " tagsCode " + u[2];
    }

    private void checkKeyFile(DefaultMessageStore store, File f) throws IOException {
        long n = 0;
        long found = 0;
        for (String line : Files.readAllLines(f.toPath(), StandardCharsets.UTF_8)) {
            if (line.isEmpty()) {
                continue;
            }
            int tab = line.indexOf('\t');
            if (tab < 0) {
                continue;
            }
            n++;
            String topic = line.substring(0, tab);
            String key = line.substring(tab + 1);
            if (queryFinds(store, topic, key, -1)) {
                found++;
            } else {
                problem("listed-key-missing", "index", -1, "queryMessage(" + topic + ", " + key + ") finds nothing");
            }
        }
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("keys", n);
        r.put("found", found);
        out.put("keyFile", r);
    }

    private int finish(DefaultMessageStore store, boolean started) throws IOException {
        try {
            if (started) {
                store.shutdown();
            }
        } catch (Exception e) {
            problem("shutdown-failed", "", -1, String.valueOf(e));
        }
        out.put("problemCount", problemCount);
        out.put("problems", problems);
        out.put("recoveryActions", actions);
        String verdict = problemCount > 0 ? "not-clean" : actions.isEmpty() ? "clean" : "recovered-without-loss";
        out.put("verdict", verdict);
        StringBuilder json = new StringBuilder();
        writeJson(json, out);
        System.out.println(json);
        return problemCount == 0 && actions.isEmpty() ? 0 : 1;
    }

    /** The report as JSON: maps (keys as their text), collections, arrays, strings, numbers,
     * booleans and null; anything else as its text. */
    static void writeJson(StringBuilder b, Object v) {
        if (v == null || v instanceof Number || v instanceof Boolean) {
            b.append(v);
        } else if (v instanceof Map) {
            b.append('{');
            String sep = "";
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                b.append(sep);
                writeJson(b, String.valueOf(e.getKey()));
                b.append(':');
                writeJson(b, e.getValue());
                sep = ",";
            }
            b.append('}');
        } else if (v instanceof Collection || v.getClass().isArray()) {
            Collection<?> items = v instanceof Collection ? (Collection<?>) v : null;
            b.append('[');
            int n = items != null ? items.size() : Array.getLength(v);
            java.util.Iterator<?> it = items != null ? items.iterator() : null;
            for (int i = 0; i < n; i++) {
                b.append(i > 0 ? "," : "");
                writeJson(b, it != null ? it.next() : Array.get(v, i));
            }
            b.append(']');
        } else {
            String s = String.valueOf(v);
            b.append('"');
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
            b.append('"');
        }
    }
}
