// The commitlog's facts (FactsJob.run: audits.message_facts' rows) folded as the reader accepts
// each record: CommitlogDecoder's record rule and fields, no column written or read.
//
// A message falls into a group by every key at once (store and topic, queueId, the minute of
// its store time, and for a DLQ topic its original topic, for a retry topic its
// reconsumeTimes): three longs in an open-addressing table of primitive aggregates. The topic
// is looked up once per record in a table of the task's topics (by its bytes); what the keys
// derive from it (DLQ and retry group) is kept there. The properties are split only into
// their pairs (no duplicate check: the last pair of a name is the map's), and read for the
// integrity tallies (KEYS, UNIQ_KEY) and a DLQ message's original topic. What is rare (the
// reader's BLANK and deferred rows, BODYCRC failures) goes through FactsJob.Key objects.
// Every fineMax groups, and at the end, the groups are folded into the grouping sets
// (FactsJob.Sets). tests/spark/test_spark_facts.py compares the rows with the SQL form.
package mqtool.spark;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;

import org.apache.spark.sql.catalyst.expressions.XXH64;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

final class CommitlogFacts extends CommitlogDecoder {
    private static final int PLAIN = 0;
    private static final int DLQ = 1;
    private static final int RETRY = 2;
    private static final int SCHEDULE = 3;  // units carry a deliver time, not the tag hash
    private final long[] ks = new long[4];  // keySums(): count and three chunk sums
    // a group's longs: its key, then its aggregates
    private static final int K1 = 0;  // topic id << 32 | queueId
    private static final int K2 = 1;  // bucket
    private static final int K3 = 2;  // DLQ: original topic id; retry: reconsumeTimes; else 0
    private static final int COUNT = 3;
    private static final int BYTES = 4;
    private static final int MIN_TS = 5;
    private static final int MAX_TS = 6;
    private static final int MIN_QO = 7;
    private static final int MAX_QO = 8;
    private static final int UNIT_N = 9;
    private static final int UNIT_XOR = 10;
    private static final int HAS_IX = 11;
    private static final int IX_N = 12;
    private static final int IX0 = 13;
    private static final int PREFIX = 16;  // FactsJob.unitPrefix of its topic and queueId
    private static final int STRIDE = 17;

    private final FactsJob.Rules rules;
    private final FactsJob.Sets sets;
    private final byte[][] originalFrom;
    private final long chunkMask = (1L << FactsJob.CHUNK_BITS) - 1;

    // the split's store
    private UTF8String storeU;
    private int storeHash;
    private long[] span;
    private long[][] files;  // its index files (FactsJob.Rules.indexFiles)
    // keySums(): the message's file (1-based, integrity.key_files), how many of its keys went
    // to the file before, its commitlog offset and store time, the number of the key
    private int kFile;
    private int kBefore;
    private long kPhys;
    private long kTs;
    private int kNum;

    // the task's topics (per store): bytes, and what the keys derive from them
    private byte[][] tBytes = new byte[16][];
    private UTF8String[] tStore = new UTF8String[16];
    private UTF8String[] tTopic = new UTF8String[16];
    private UTF8String[] tGroup = new UTF8String[16];  // the DLQ or retry group
    private int[] tKind = new int[16];
    private int[] tHash = new int[16];
    private int topics;
    private int[] tSlots = new int[64];  // topic id + 1, 0: empty
    private int lastTopic = -1;

    // DLQ messages' original topics
    private final HashMap<String, Integer> originalIds = new HashMap<>();
    private UTF8String[] originals = new UTF8String[4];

    // the groups (STRIDE longs each) and their open-addressing slots (group + 1, 0: empty)
    private long[] g = new long[STRIDE * 256];
    private int groups;
    private int[] slots = new int[1024];

    // the rare groups, keyed as FactsJob.Key
    private final HashMap<FactsJob.Key, FactsJob.Acc> rare = new HashMap<>();

    CommitlogFacts(List<CommitlogSource.SplitSpec> splits, CommitlogSource.Options opt,
                   FactsJob.Rules rules) {
        super(splits, new StructType(), opt);
        this.rules = rules;
        this.sets = new FactsJob.Sets(rules);
        originalFrom = new byte[rules.originalTopicFrom.length][];
        for (int i = 0; i < originalFrom.length; i++) {
            originalFrom[i] = rules.originalTopicFrom[i].getBytes();
        }
    }

    /** Every record of the splits folded: the grouping sets' rows (FactsJob.Sets). */
    List<Object[]> fold() throws IOException {
        try {
            while (next()) {
                used = 0;  // no row keeps the arena's bytes
            }
        } finally {
            close();
        }
        flush();
        return sets.result();
    }

    @Override
    protected void openSplit(long size) throws IOException {
        UTF8String s = UTF8String.fromString(cur.store);
        if (!s.equals(storeU)) {
            storeU = s;
            storeHash = s.hashCode();
            span = rules.indexSpans.get(cur.store);
            files = rules.indexFiles.get(cur.store);
        }
        super.openSplit(size);
    }

    // --- messages --------------------------------------------------------------------------
    @Override
    void message(int row, int p, int size) {
        int t = topic();
        long phys = cur.base + p;
        int qid = b.getInt(p + RecordLayout.QUEUEID_AT);
        long qo = b.getLong(p + RecordLayout.QUEUEOFFSET_AT);
        long ts = b.getLong(storeTsPos);
        int kind = tKind[t];
        boolean tallies = rules.tallies();
        int m = tallies || kind == DLQ ? pairs() : 0;
        long k3 = kind == DLQ ? original(m) : kind == RETRY ? b.getInt(reconPos) : 0;
        long bucket = Math.floorDiv(ts, rules.bucketMs) * rules.bucketMs;
        if (opt.checkCrc && !crcOk(b.getInt(p + RecordLayout.BODYCRC_AT))) {
            FactsJob.Acc a = rareGroup(messageKey(t, qid, bucket, k3, p, phys, size, qo));
            a.count++;
            a.bytes(size);
            a.ts(ts);
            a.qo(qo);
            if (tallies) {
                tally(a, null, -1, t, m, phys, qid, qo, size, ts);
            }
            return;
        }
        int at = group(((long) t << 32) | (qid & 0xFFFFFFFFL), bucket, k3);
        long[] a = g;
        a[at + COUNT]++;
        a[at + BYTES] += size;
        a[at + MIN_TS] = Math.min(a[at + MIN_TS], ts);
        a[at + MAX_TS] = Math.max(a[at + MAX_TS], ts);
        a[at + MIN_QO] = Math.min(a[at + MIN_QO], qo);
        a[at + MAX_QO] = Math.max(a[at + MAX_QO], qo);
        if (tallies) {
            tally(null, a, at, t, m, phys, qid, qo, size, ts);
        }
    }

    /** integrity.message_tallies of the message: into the rare group ``r`` or the group at
     * ``at`` of ``a``. */
    private void tally(FactsJob.Acc r, long[] a, int at, int t, int m, long phys, int qid,
                       long qo, int size, long ts) {
        int txn = sysFlag & rules.txnMask;
        boolean getsUnit = true;
        for (int v : rules.notInConsumeQueue) {
            getsUnit &= txn != v;
        }
        boolean indexed = txn != rules.txnRollback && span != null && phys >= span[0]
            && phys <= span[1];
        if (getsUnit || indexed) {
            pick(m);
        }
        if (getsUnit) {
            int j = picked[0];
            long tag = tKind[t] == SCHEDULE ? Math.floorMod(ts, rules.delayUnitMs)
                : j < 0 ? 0 : FactsJob.stringHash(arena, pairs[4 * j + 2], pairs[4 * j + 3]);
            long h = FactsJob.unitHash(r != null
                ? FactsJob.unitPrefix(arena, rTopic, topicLen, qid) : a[at + PREFIX], phys, qo,
                size, tag);
            if (r != null) {
                r.units.add(1, h);
            } else {
                a[at + UNIT_N]++;
                a[at + UNIT_XOR] ^= h;
            }
        }
        if (indexed) {
            keySums(phys, ts);
            long[] k = ks;
            if (r != null) {
                r.entries(k[0], k[1], k[2], k[3]);
            } else {
                a[at + HAS_IX] = 1;
                a[at + IX_N] += k[0];
                a[at + IX0] += k[1];
                a[at + IX0 + 1] += k[2];
                a[at + IX0 + 2] += k[3];
            }
        }
    }

    /** integrity.message_tallies' index sums of the message (picked by pick()), into ks: for
     * each of its keys (integrity.index_key_array: the UNIQ_KEY, each non-empty KEYS token),
     * the count and the three chunks of integrity.entry_hash of its topic#key's
     * indexKeyHashMethod, and the timeDiff its file's begin time gives where verify checks it
     * (integrity._key_entry_hashes). */
    private void keySums(long phys, long ts) {
        ks[0] = ks[1] = ks[2] = ks[3] = 0;
        long base = XXH64.hashLong(phys, FactsJob.SEED);
        int f = 0;  // integrity.key_files: how many files begin at or before phys
        if (files != null) {
            int hi = files.length;
            while (f < hi) {
                int mid = (f + hi) >>> 1;
                if (files[mid][0] <= phys) {
                    f = mid + 1;
                } else {
                    hi = mid;
                }
            }
        }
        kFile = f;
        kBefore = f >= 1 && files[f - 1][0] == phys ? (int) files[f - 1][3] : 0;
        kPhys = phys;
        kTs = ts;
        kNum = 0;
        int u = picked[2];
        if (u >= 0) {
            addKey(base, pairs[4 * u + 2], pairs[4 * u + 3]);
        }
        int j = picked[1];
        if (j < 0) {
            return;
        }
        byte[] rec = arena;
        int run = pairs[4 * j + 2];
        for (int i = run, e = i + pairs[4 * j + 3]; i <= e; i++) {
            if (i == e || rec[i] == rules.keySeparator) {
                if (i > run) {
                    addKey(base, run, i - run);
                }
                run = i + 1;
            }
        }
    }

    private void addKey(long base, int at, int len) {
        int kh = FactsJob.indexKeyHash(arena, rTopic, topicLen, arena, at, len);
        long x = XXH64.hashInt(kh, base);
        int i = kNum++;
        if (kFile >= 1) {
            int g = Math.max(i < kBefore ? kFile - 1 : kFile, 1);  // the key's file
            long[] file = files[g - 1];
            boolean first = file[0] == kPhys && i == (g == kFile ? kBefore : 0);
            if (!first && file[2] > 0) {
                x = XXH64.hashInt(timeDiff(kTs, file[2]), x);
            }
        }
        ks[0]++;
        ks[1] += x & chunkMask;
        ks[2] += (x >>> FactsJob.CHUNK_BITS) & chunkMask;
        ks[3] += x >>> (2 * FactsJob.CHUNK_BITS);
    }

    /** integrity.index_time_diff: IndexFile#putKey's timeDiff, whole seconds from ``begin``
     * to ``ts`` clamped to 0..Integer.MAX_VALUE. */
    static int timeDiff(long ts, long begin) {
        long d = Math.max(ts - begin, 0L) / 1000;
        return (int) Math.min(d, Integer.MAX_VALUE);
    }

    /** The id of a DLQ message's original topic: coalesce(properties[RETRY_TOPIC],
     * properties[REAL_TOPIC], "") of its first m pairs. */
    private long original(int m) {
        String v = "";
        for (byte[] name : originalFrom) {
            int j = last(m, name);
            if (j >= 0) {
                v = new String(arena, pairs[4 * j + 2], pairs[4 * j + 3], StandardCharsets.UTF_8);
                break;
            }
        }
        Integer id = originalIds.get(v);
        if (id == null) {
            id = originalIds.size();
            originalIds.put(v, id);
            if (id >= originals.length) {
                originals = Arrays.copyOf(originals, 2 * originals.length);
            }
            originals[id] = UTF8String.fromString(v);
        }
        return id;
    }

    // --- the topics ------------------------------------------------------------------------
    /** The id of the store's topic in the arena at rTopic (topicLen bytes). */
    private int topic() {
        byte[] rec = arena;
        int t = lastTopic;
        if (t >= 0 && tStore[t] == storeU && sameBytes(tBytes[t], rec, rTopic, topicLen)) {
            return t;
        }
        int h = storeHash;
        for (int i = 0; i < topicLen; i++) {
            h = 31 * h + rec[rTopic + i];
        }
        int mask = tSlots.length - 1;
        for (int s = mix(h) & mask; ; s = (s + 1) & mask) {
            int id = tSlots[s] - 1;
            if (id < 0) {
                t = newTopic(h);
                tSlots[s] = t + 1;
                if (2 * topics > tSlots.length) {
                    rehashTopics();
                }
                break;
            }
            if (tHash[id] == h && tStore[id] == storeU
                    && sameBytes(tBytes[id], rec, rTopic, topicLen)) {
                t = id;
                break;
            }
        }
        lastTopic = t;
        return t;
    }

    private int newTopic(int h) {
        int t = topics++;
        if (t == tBytes.length) {
            int c = 2 * t;
            tBytes = Arrays.copyOf(tBytes, c);
            tStore = Arrays.copyOf(tStore, c);
            tTopic = Arrays.copyOf(tTopic, c);
            tGroup = Arrays.copyOf(tGroup, c);
            tKind = Arrays.copyOf(tKind, c);
            tHash = Arrays.copyOf(tHash, c);
        }
        tBytes[t] = Arrays.copyOfRange(arena, rTopic, rTopic + topicLen);
        tStore[t] = storeU;
        tHash[t] = h;
        UTF8String u = UTF8String.fromBytes(tBytes[t]);
        tTopic[t] = u;
        if (u.startsWith(rules.dlqPrefix)) {
            tKind[t] = DLQ;
            tGroup[t] = u.substring(rules.dlqPrefix.numChars(), u.numChars());
        } else if (u.startsWith(rules.retryPrefix)) {
            tKind[t] = RETRY;
            tGroup[t] = u.substring(rules.retryPrefix.numChars(), u.numChars());
        } else if (u.equals(rules.scheduleTopic)) {
            tKind[t] = SCHEDULE;
        }
        return t;
    }

    private void rehashTopics() {
        tSlots = new int[2 * tSlots.length];
        int mask = tSlots.length - 1;
        for (int t = 0; t < topics; t++) {
            int s = mix(tHash[t]) & mask;
            while (tSlots[s] != 0) {
                s = (s + 1) & mask;
            }
            tSlots[s] = t + 1;
        }
    }

    private static boolean sameBytes(byte[] a, byte[] b, int at, int len) {
        if (a.length != len) {
            return false;
        }
        int i = 0;
        for (; i + 8 <= len; i += 8) {
            if (word(a, i) != word(b, at + i)) {
                return false;
            }
        }
        for (; i < len; i++) {
            if (a[i] != b[at + i]) {
                return false;
            }
        }
        return true;
    }

    private static int mix(int h) {
        h *= 0x9E3779B1;
        return h ^ (h >>> 16);
    }

    // --- the groups ------------------------------------------------------------------------
    /** The position in g of the group of key (k1, k2, k3), made when new. */
    private int group(long k1, long k2, long k3) {
        long h = k1 * 0x9E3779B97F4A7C15L + k2 * 0xC2B2AE3D27D4EB4FL + k3 * 0x165667B19E3779F9L;
        int mask = slots.length - 1;
        for (int s = (int) (h ^ (h >>> 29)) & mask; ; s = (s + 1) & mask) {
            int id = slots[s] - 1;
            if (id < 0) {
                if (groups >= rules.fineMax) {
                    flush();
                    return group(k1, k2, k3);
                }
                int at = newGroup(k1, k2, k3);
                slots[s] = groups;
                if (2 * groups > slots.length) {
                    rehashGroups();
                }
                return at;
            }
            int at = id * STRIDE;
            if (g[at + K1] == k1 && g[at + K2] == k2 && g[at + K3] == k3) {
                return at;
            }
        }
    }

    private int newGroup(long k1, long k2, long k3) {
        int at = groups++ * STRIDE;
        if (at + STRIDE > g.length) {
            g = Arrays.copyOf(g, 2 * g.length);
        }
        Arrays.fill(g, at, at + STRIDE, 0L);
        g[at + K1] = k1;
        g[at + K2] = k2;
        g[at + K3] = k3;
        g[at + MIN_TS] = Long.MAX_VALUE;
        g[at + MAX_TS] = Long.MIN_VALUE;
        g[at + MIN_QO] = Long.MAX_VALUE;
        g[at + MAX_QO] = Long.MIN_VALUE;
        byte[] topic = tBytes[(int) (k1 >>> 32)];
        g[at + PREFIX] = FactsJob.unitPrefix(topic, 0, topic.length, (int) k1);
        return at;
    }

    private void rehashGroups() {
        slots = new int[2 * slots.length];
        int mask = slots.length - 1;
        for (int id = 0; id < groups; id++) {
            int at = id * STRIDE;
            long h = g[at + K1] * 0x9E3779B97F4A7C15L + g[at + K2] * 0xC2B2AE3D27D4EB4FL
                + g[at + K3] * 0x165667B19E3779F9L;
            int s = (int) (h ^ (h >>> 29)) & mask;
            while (slots[s] != 0) {
                s = (s + 1) & mask;
            }
            slots[s] = id + 1;
        }
    }

    /** Every group, the rare ones too, folded into the grouping sets, and emptied. */
    private void flush() {
        for (int id = 0; id < groups; id++) {
            int at = id * STRIDE;
            int t = (int) (g[at + K1] >>> 32);
            FactsJob.Key k = messageKey(t, (int) g[at + K1], g[at + K2], g[at + K3], -1, 0, 0, 0);
            FactsJob.Acc a = new FactsJob.Acc();
            a.count = g[at + COUNT];
            a.bytes(g[at + BYTES]);
            a.ts(g[at + MIN_TS]);
            a.ts(g[at + MAX_TS]);
            a.qo(g[at + MIN_QO]);
            a.qo(g[at + MAX_QO]);
            if (g[at + UNIT_N] > 0) {
                a.units.add(g[at + UNIT_N], g[at + UNIT_XOR]);
            }
            if (g[at + HAS_IX] != 0) {
                a.entries(g[at + IX_N], g[at + IX0], g[at + IX0 + 1], g[at + IX0 + 2]);
            }
            sets.add(k, a);
        }
        groups = 0;
        Arrays.fill(slots, 0);
        for (java.util.Map.Entry<FactsJob.Key, FactsJob.Acc> e : rare.entrySet()) {
            sets.add(e.getKey(), e.getValue());
        }
        rare.clear();
    }

    // --- the rare rows ---------------------------------------------------------------------
    private FactsJob.Acc rareGroup(FactsJob.Key k) {
        FactsJob.Acc a = rare.get(k);
        if (a == null) {
            a = new FactsJob.Acc();
            rare.put(k, a);
        }
        return a;
    }

    /** A message's key: topic t, queueId, bucket, k3 (as group()); with p >= 0 a BODYCRC
     * failure's rare row (at p, commitlog offset phys, size bytes, queue offset qo). */
    private FactsJob.Key messageKey(int t, int qid, long bucket, long k3, int p, long phys,
                                    int size, long qo) {
        FactsJob.Key k = new FactsJob.Key();
        k.store = tStore[t];
        k.storeHash = k.store.hashCode();
        k.kind = rules.kindMessage;
        k.topic = tTopic[t];
        k.hasQueueId = true;
        k.queueId = qid;
        k.hasBucket = true;
        k.bucket = bucket;
        if (tKind[t] == DLQ) {
            k.dlqGroup = tGroup[t];
            k.originalTopic = originals[(int) k3];
        } else if (tKind[t] == RETRY) {
            k.retryGroup = tGroup[t];
            k.hasReconsume = true;
            k.reconsumeTimes = (int) k3;
        }
        if (p >= 0) {
            Object[] x = new Object[rules.rareColumns.length + 1];
            x[0] = rules.crcRow;
            for (int i = 0; i < rules.rareColumns.length; i++) {
                x[i + 1] = messageValue(rules.rareColumns[i], t, p, phys, size, qo);
            }
            k.x = x;
        }
        return k;
    }

    /** Column ``name`` of the message at p, as its Spark type's Java value. */
    private Object messageValue(String name, int t, int p, long phys, int size, long qo) {
        switch (name) {
            case "file": return cur.name;
            case "fileOffset": return (long) p;
            case "commitLogOffset": return phys;
            case "storeSize": return size;
            case "detail": return null;
            case "topic": return tTopic[t].toString();
            case "queueId": return b.getInt(p + RecordLayout.QUEUEID_AT);
            case "queueOffset": return qo;
            case "bodyCRC": return b.getInt(p + RecordLayout.BODYCRC_AT);
            case "bodyLength": return bodyLen;
            default: throw new IllegalArgumentException("rare-row column " + name);
        }
    }

    @Override
    void special(int row, String kind, String detail, long offset, long length) {
        FactsJob.Key k = new FactsJob.Key();
        k.store = storeU;
        k.storeHash = storeHash;
        k.kind = UTF8String.fromString(kind);
        if (k.kind.equals(rules.kindDeferred) || k.kind.equals(rules.kindUnreadable)) {
            Object[] x = new Object[rules.rareColumns.length + 1];
            x[0] = kind;
            for (int i = 0; i < rules.rareColumns.length; i++) {
                x[i + 1] = specialValue(rules.rareColumns[i], detail, offset, length);
            }
            k.x = x;
        }
        rareGroup(k).count++;
    }

    /** Column ``name`` of a row that is no message, as its Spark type's Java value. */
    private Object specialValue(String name, String detail, long offset, long length) {
        switch (name) {
            case "file": return cur.name;
            case "fileOffset": return offset;
            case "commitLogOffset": return cur.base + offset;
            case "storeSize": return (int) length;
            case "detail": return detail;
            case "topic": case "queueId": case "queueOffset": case "bodyCRC": case "bodyLength":
                return null;
            default: throw new IllegalArgumentException("rare-row column " + name);
        }
    }
}
