// The aggregations of `mqtool scan` as Spark jobs over mqtool's reader, with no SQL plan, each
// giving the rows of the Spark SQL it stands for:
// - run: the commitlog's facts, mqtool.spark.audits.message_facts (the grouping sets of
//   audits.FACT_SETS, the tallies of integrity.message_tallies);
// - queues: the consume queue's, audits.queue_facts (with integrity.unit_tallies);
// - index: the index entries' tallies, integrity.index_tallies.
// Each is a job of its own, or all three are one (scan: what `mqtool scan` runs, each task
// folding its share of the three sources): an RDD of the reader's partitions, one task per
// partition folding each record or unit into a hash aggregation as the reader reads it
// (CommitlogFacts, QueueFacts, IndexFacts: the readers' record rules, no column written), the
// partitions' groups merged on the driver.
//
// Why: a cold JVM pays for Catalyst (analysis, optimisation, whole-stage code generation, the
// adaptive re-planning of each stage) and for compiling the generated code, seconds that no
// store size amortises for a scan that runs once; and the scan's JVM compiles with C1 alone
// (mqtool.spark.session.job_conf), where every layer between a record and its aggregate
// (a column vector written, then read) is a call (spark/README.md).
//
// One home per rule: every constant (record kinds, topic prefixes, property names, sysFlag
// masks, the key separator, index spans, first commitlog offsets, tally names) comes from the
// Python side as JSON; the logic mirrors the SQL forms expression by expression, and
// tests/spark/test_spark_facts.py compares each job with its SQL form row for row on every
// fixture store and on damaged ones.
package mqtool.spark;

import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.catalyst.expressions.XXH64;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

public final class FactsJob {
    private FactsJob() {
    }

    static final long SEED = 42L;  // Spark's xxhash64 seed
    static final int CHUNK_BITS = 21;  // integrity._CHUNK_BITS
    // the grouping sets, in audits.FACT_SETS' order
    static final String[] SETS = {"totals", "queues", "rate", "dlq", "retry", "rows"};

    /** The rules the Python side hands over (its constants: one home each). */
    static final class Rules implements Serializable {
        private static final long serialVersionUID = 1L;
        UTF8String kindMessage;
        UTF8String kindUnreadable;
        UTF8String kindDeferred;
        String crcRow;
        UTF8String dlqPrefix;
        UTF8String retryPrefix;
        UTF8String[] originalTopicFrom;  // property names, the first present wins
        byte keySeparator;
        int txnMask;
        int txnRollback;
        int[] notInConsumeQueue;
        long bucketMs;
        int fineMax;  // at most this many groups by every key at once in a task
        String[] tallyNames;  // units' count and XOR, index entries' count and 3 chunk sums
                              // (null: no tallies)
        UTF8String scheduleTopic;  // its units' tagsCode is no tag hash (with tallyNames)
        long delayUnitMs;  // a schedule message's tag: its storeTimestamp modulo this
        String[] rareColumns;  // audits.RARE_COLUMNS: the columns a rare row keeps
        HashMap<String, long[]> indexSpans = new HashMap<>();  // store -> [lo, hi]
        // store -> its index files' beginPhyOffset, endPhyOffset, beginTimestamp and the keys
        // of the message at its beginPhyOffset in the file before (integrity.IndexSpan.files)
        HashMap<String, long[][]> indexFiles = new HashMap<>();

        static Rules of(String json) throws java.io.IOException {
            JsonNode j = new ObjectMapper().readTree(json);
            Rules r = new Rules();
            r.kindMessage = UTF8String.fromString(j.get("kindMessage").asText());
            r.kindUnreadable = UTF8String.fromString(j.get("kindUnreadable").asText());
            r.kindDeferred = UTF8String.fromString(j.get("kindDeferred").asText());
            r.crcRow = j.get("crcRow").asText();
            r.dlqPrefix = UTF8String.fromString(j.get("dlqPrefix").asText());
            r.retryPrefix = UTF8String.fromString(j.get("retryPrefix").asText());
            JsonNode from = j.get("originalTopicFrom");
            r.originalTopicFrom = new UTF8String[from.size()];
            for (int i = 0; i < from.size(); i++) {
                r.originalTopicFrom[i] = UTF8String.fromString(from.get(i).asText());
            }
            r.bucketMs = j.get("bucketMs").asLong();
            r.fineMax = Math.max(1, j.path("fineMax").asInt(1 << 16));
            r.rareColumns = strings(j.get("rareColumns"));
            if (!j.has("tallyNames")) {
                return r;
            }
            r.tallyNames = strings(j.get("tallyNames"));
            r.scheduleTopic = UTF8String.fromString(j.get("scheduleTopic").asText());
            r.delayUnitMs = j.get("delayUnitMs").asLong();
            byte[] sep = j.get("keySeparator").asText().getBytes(StandardCharsets.UTF_8);
            if (sep.length != 1) {
                throw new IllegalArgumentException("the key separator must be one byte");
            }
            r.keySeparator = sep[0];
            r.txnMask = j.get("txnMask").asInt();
            r.txnRollback = j.get("txnRollback").asInt();
            JsonNode nic = j.get("notInConsumeQueue");
            r.notInConsumeQueue = new int[nic.size()];
            for (int i = 0; i < nic.size(); i++) {
                r.notInConsumeQueue[i] = nic.get(i).asInt();
            }
            Iterator<Map.Entry<String, JsonNode>> spans = j.get("indexSpans").fields();
            while (spans.hasNext()) {
                Map.Entry<String, JsonNode> e = spans.next();
                if (!e.getValue().isNull()) {
                    r.indexSpans.put(e.getKey(),
                        new long[] {e.getValue().get(0).asLong(), e.getValue().get(1).asLong()});
                }
            }
            Iterator<Map.Entry<String, JsonNode>> files = j.get("indexFiles").fields();
            while (files.hasNext()) {
                Map.Entry<String, JsonNode> e = files.next();
                long[][] fs = new long[e.getValue().size()][];
                for (int i = 0; i < fs.length; i++) {
                    JsonNode f = e.getValue().get(i);
                    fs[i] = new long[] {f.get(0).asLong(), f.get(1).asLong(), f.get(2).asLong(),
                        f.get(3).asLong()};
                }
                r.indexFiles.put(e.getKey(), fs);
            }
            return r;
        }

        boolean tallies() {
            return tallyNames != null;
        }

        private static String[] strings(JsonNode a) {
            String[] out = new String[a.size()];
            for (int i = 0; i < out.length; i++) {
                out[i] = a.get(i).asText();
            }
            return out;
        }
    }

    /** integrity._unit_hash: xxhash64(topic, queueId, commitLogOffset, queueOffset,
     * storeSize, tag) as Spark computes it, the same over a message and over its consume-queue
     * unit; ``prefix`` is unitPrefix() of its topic and queueId (one per queue), ``tag`` the
     * unit's tagsCode or the message's tag hash; in the schedule topic the deliver time's or
     * the storeTimestamp's remainder by delayUnitMs (integrity.unit_tag,
     * integrity.message_tag). */
    static long unitHash(long prefix, long off, long qo, int size, long tag) {
        long h = XXH64.hashLong(off, prefix);
        h = XXH64.hashLong(qo, h);
        h = XXH64.hashInt(size, h);
        return XXH64.hashLong(tag, h);
    }

    /** IndexFile#indexKeyHashMethod of topic#key, the topic's and the key's UTF-8 bytes
     * given: abs of String#hashCode, Integer.MIN_VALUE 0 (integrity.index_key_hashes). */
    static int indexKeyHash(byte[] t, int tAt, int tLen, byte[] k, int kAt, int kLen) {
        long h = asciiHash(asciiHash(asciiHash(0, t, tAt, tLen), SHARP, 0, 1), k, kAt, kLen);
        int v = h != NOT_ASCII ? (int) h  // else as Java decodes them
            : (new String(t, tAt, tLen, StandardCharsets.UTF_8) + "#"
               + new String(k, kAt, kLen, StandardCharsets.UTF_8)).hashCode();
        return v == Integer.MIN_VALUE ? 0 : Math.abs(v);
    }

    /** String#hashCode of the UTF-8 bytes ``len`` long at ``at`` of ``b`` (the tagsCode
     * MessageExtBrokerInner#tagsString2tagsCode gives a tag; integrity.java_string_hash). */
    static long stringHash(byte[] b, int at, int len) {
        long h = asciiHash(0, b, at, len);
        return h != NOT_ASCII ? (int) h
            : new String(b, at, len, StandardCharsets.UTF_8).hashCode();  // as Java decodes it
    }

    private static final byte[] SHARP = {'#'};
    private static final long NOT_ASCII = Long.MIN_VALUE;

    /** String#hashCode's state ``h`` continued over bytes that are ASCII (one char each);
     * NOT_ASCII when ``h`` is or a byte is not ASCII (the caller decodes the text then). */
    private static long asciiHash(long h, byte[] b, int at, int len) {
        if (h == NOT_ASCII) {
            return h;
        }
        int v = (int) h;
        for (int i = at, e = at + len; i < e; i++) {
            if (b[i] < 0) {
                return NOT_ASCII;
            }
            v = 31 * v + b[i];
        }
        return v;
    }

    /** The hash of unitHash's first two values: the topic's bytes ``topicLen`` long at
     * ``topicAt`` of ``topic``, and ``qid``. */
    static long unitPrefix(byte[] topic, int topicAt, int topicLen, int qid) {
        long h = XXH64.hashUnsafeBytes(topic, Platform.BYTE_ARRAY_OFFSET + topicAt, topicLen,
            SEED);
        return XXH64.hashInt(qid, h);
    }

    /** The units' tallies of a group (integrity._UNIT_TALLIES): their count and the XOR of
     * their unitHash, null when none was counted. */
    static final class UnitTally implements Serializable {
        private static final long serialVersionUID = 1L;
        boolean has;
        long n;
        long xor;

        void add(long count, long hash) {
            has = true;
            n += count;
            xor ^= hash;
        }

        void merge(UnitTally o) {
            if (o.has) {
                add(o.n, o.xor);
            }
        }

        void put(ObjectNode agg, String[] names) {
            FactsJob.put(agg, names[0], has, n);
            FactsJob.put(agg, names[1], has, xor);
        }
    }

    /** The aggregates of one group, null-aware as Spark's sum, min, max and bit_xor (a
     * "has" flag says a value was aggregated: else the column is null). */
    static final class Acc implements Serializable {
        private static final long serialVersionUID = 1L;
        long count;
        boolean hasBytes;
        long bytes;
        boolean hasTs;
        long minTs = Long.MAX_VALUE;
        long maxTs = Long.MIN_VALUE;
        boolean hasQo;
        long minQo = Long.MAX_VALUE;
        long maxQo = Long.MIN_VALUE;
        final UnitTally units = new UnitTally();
        boolean hasIx;
        long ixN;
        final long[] ix = new long[3];

        void bytes(long v) {
            hasBytes = true;
            bytes += v;
        }

        void ts(long v) {
            hasTs = true;
            minTs = Math.min(minTs, v);
            maxTs = Math.max(maxTs, v);
        }

        void qo(long v) {
            hasQo = true;
            minQo = Math.min(minQo, v);
            maxQo = Math.max(maxQo, v);
        }

        void entries(long n, long c0, long c1, long c2) {
            hasIx = true;
            ixN += n;
            ix[0] += c0;
            ix[1] += c1;
            ix[2] += c2;
        }

        void merge(Acc o) {
            count += o.count;
            if (o.hasBytes) {
                bytes(o.bytes);
            }
            if (o.hasTs) {
                ts(o.minTs);
                ts(o.maxTs);
            }
            if (o.hasQo) {
                qo(o.minQo);
                qo(o.maxQo);
            }
            units.merge(o.units);
            if (o.hasIx) {
                entries(o.ixN, o.ix[0], o.ix[1], o.ix[2]);
            }
        }
    }

    /** A group's keys by every key at once (audits.message_facts' "keyed" projection). */
    static final class Key {
        UTF8String store;
        int storeHash;  // store.hashCode(), which CommitlogFacts keeps per store
        UTF8String kind;
        UTF8String topic;  // qTopic = rTopic: the topic of a message
        boolean hasQueueId;  // qQueueId
        int queueId;
        boolean hasBucket;  // bucketStart
        long bucket;
        UTF8String dlqGroup;
        UTF8String originalTopic;
        UTF8String retryGroup;
        boolean hasReconsume;
        int reconsumeTimes;
        Object[] x;  // the rare row's kind and Rules.rareColumns, or null

        @Override
        public int hashCode() {
            int h = storeHash;
            h = 31 * h + hash(kind);
            h = 31 * h + hash(topic);
            h = 31 * h + (hasQueueId ? queueId : -1);
            h = 31 * h + (hasBucket ? Long.hashCode(bucket) : -1);
            h = 31 * h + hash(dlqGroup);
            h = 31 * h + hash(originalTopic);
            h = 31 * h + hash(retryGroup);
            h = 31 * h + (hasReconsume ? reconsumeTimes : -1);
            return x == null ? h : 31 * h + Arrays.hashCode(x);
        }

        private static int hash(UTF8String s) {
            return s == null ? 0 : s.hashCode();
        }

        @Override
        public boolean equals(Object o) {
            if (!(o instanceof Key)) {
                return false;
            }
            Key k = (Key) o;
            return hasQueueId == k.hasQueueId && queueId == k.queueId
                && hasBucket == k.hasBucket && bucket == k.bucket
                && hasReconsume == k.hasReconsume && reconsumeTimes == k.reconsumeTimes
                && Objects.equals(topic, k.topic) && Objects.equals(kind, k.kind)
                && Objects.equals(store, k.store) && Objects.equals(dlqGroup, k.dlqGroup)
                && Objects.equals(originalTopic, k.originalTopic)
                && Objects.equals(retryGroup, k.retryGroup) && Arrays.equals(x, k.x);
        }

        /** This group's key in grouping set ``set`` (store first), as plain values; ``rare``:
         * how many columns a rare row keeps (Rules.rareColumns). */
        List<Object> of(int set, int rare) {
            switch (set) {
                case 0: return Arrays.asList(str(store), str(kind));
                case 1: return Arrays.asList(str(store), str(topic),
                    hasQueueId ? (Object) queueId : null);
                case 2: return Arrays.asList(str(store), str(topic),
                    hasBucket ? (Object) bucket : null);
                case 3: return Arrays.asList(str(store), str(dlqGroup), str(originalTopic));
                case 4: return Arrays.asList(str(store), str(retryGroup),
                    hasReconsume ? (Object) reconsumeTimes : null);
                default:
                    List<Object> out = new ArrayList<>();
                    out.add(str(store));
                    out.addAll(x == null ? Arrays.asList(new Object[rare + 1])
                        : Arrays.asList(x));
                    return out;
            }
        }

        private static String str(UTF8String s) {
            return s == null ? null : s.toString();
        }
    }

    /** The grouping sets of audits.FACT_SETS over groups by every key at once (what
     * CommitlogFacts folds a partition's records into): set -> key -> aggregates. */
    static final class Sets {
        private final Rules rules;
        private final List<HashMap<List<Object>, Acc>> sets = new ArrayList<>();  // by SETS[i]

        Sets(Rules rules) {
            this.rules = rules;
            for (int s = 0; s < SETS.length; s++) {
                sets.add(new HashMap<>());
            }
        }

        /** The group of key ``k`` (by every key at once) and its aggregates ``a``. */
        void add(Key k, Acc a) {
            for (int s = 0; s < SETS.length; s++) {
                sets.get(s).computeIfAbsent(k.of(s, rules.rareColumns.length), x -> new Acc())
                    .merge(a);
            }
        }

        /** [set, key values, aggregates] per group of each set. */
        List<Object[]> result() {
            List<Object[]> out = new ArrayList<>();
            for (int s = 0; s < SETS.length; s++) {
                for (Map.Entry<List<Object>, Acc> e : sets.get(s).entrySet()) {
                    out.add(new Object[] {s, new ArrayList<>(e.getKey()), e.getValue()});
                }
            }
            return out;
        }
    }

    /** What one task does with its partition's splits: a result the driver merges. */
    interface Task<R> extends Serializable {
        R run(List<CommitlogSource.SplitSpec> splits) throws java.io.IOException;
    }

    /** One Spark job, a task per partition of ``splits`` (CommitlogSource's option "splits");
     * the partitions' results, in order. */
    static <R> List<R> perPartition(JavaSparkContext jsc, String splits, Task<R> task) {
        List<ArrayList<CommitlogSource.SplitSpec>> parts = CommitlogSource.parts(splits);
        if (parts.isEmpty()) {
            return new ArrayList<>();
        }
        return jsc.parallelize(parts, parts.size()).map(task::run).collect();
    }

    /** The commitlog's facts: ``splits`` as CommitlogSource's option "splits",
     * ``readerOptions`` its other options (JSON object), ``rulesJson`` the Rules. Returns the
     * grouping-set rows as JSON: [[set, [key values], {aggregates}]]. */
    public static String run(JavaSparkContext jsc, String splits, String readerOptions,
                             String rulesJson) throws Exception {
        final CommitlogSource.Options opts = readerOptions(readerOptions);
        final Rules rules = Rules.of(rulesJson);
        return JSON.writeValueAsString(factRows(perPartition(jsc, splits,
            part -> new CommitlogFacts(part, opts, rules).fold()), rules));
    }

    private static final ObjectMapper JSON = new ObjectMapper();

    static CommitlogSource.Options readerOptions(String readerOptions) throws Exception {
        HashMap<String, String> o = new HashMap<>();
        JSON.readTree(readerOptions).fields()
            .forEachRemaining(e -> o.put(e.getKey(), e.getValue().asText()));
        return new CommitlogSource.Options(new CaseInsensitiveStringMap(o));
    }

    /** The partitions' grouping-set rows (CommitlogFacts#fold) merged per set and key, as
     * run() answers them. */
    static ArrayNode factRows(List<List<Object[]>> parts, Rules rules) {
        List<HashMap<List<Object>, Acc>> by = new ArrayList<>();
        for (int s = 0; s < SETS.length; s++) {
            by.add(new HashMap<>());
        }
        for (List<Object[]> rows : parts) {
            for (Object[] row : rows) {
                @SuppressWarnings("unchecked")
                List<Object> key = (List<Object>) row[1];
                by.get((Integer) row[0]).computeIfAbsent(key, x -> new Acc()).merge((Acc) row[2]);
            }
        }
        ArrayNode out = JSON.createArrayNode();
        for (int s = 0; s < SETS.length; s++) {
            for (Map.Entry<List<Object>, Acc> e : by.get(s).entrySet()) {
                ArrayNode row = out.addArray();
                row.add(SETS[s]);
                row.add(JSON.valueToTree(e.getKey()));
                Acc a = e.getValue();
                ObjectNode agg = row.addObject();
                agg.put("count", a.count);
                put(agg, "bytes", a.hasBytes, a.bytes);
                put(agg, "minStoreTimestamp", a.hasTs, a.minTs);
                put(agg, "maxStoreTimestamp", a.hasTs, a.maxTs);
                put(agg, "minQueueOffset", a.hasQo, a.minQo);
                put(agg, "maxQueueOffset", a.hasQo, a.maxQo);
                if (rules.tallies()) {
                    String[] t = rules.tallyNames;
                    a.units.put(agg, t);
                    put(agg, t[2], a.hasIx, a.ixN);
                    for (int i = 0; i < 3; i++) {
                        put(agg, t[3 + i], a.hasIx, a.ix[i]);
                    }
                }
            }
        }
        return out;
    }

    /** ``value`` as ``name``, or null when nothing was aggregated. */
    static void put(ObjectNode agg, String name, boolean has, long value) {
        if (has) {
            agg.put(name, value);
        } else {
            agg.putNull(name);
        }
    }

    // --- the consume queue and the index -----------------------------------------------------

    /** The rules of the consume queue's and the index's jobs (audits.queue_facts,
     * integrity.unit_tallies, integrity.index_tallies), from the Python side. */
    static final class AuxRules implements Serializable {
        private static final long serialVersionUID = 1L;
        String scheduleTopic;
        long nowMs;
        HashMap<String, HashMap<Integer, Long>> delayOffsets = new HashMap<>();  // store -> queueId
        HashMap<String, Long> known = new HashMap<>();  // store -> its first commitlog offset
        String[] tallyNames;  // null: no tallies
        long delayUnitMs;  // the units' tallies: a schedule unit's tag is its tagsCode modulo
                           // this (0 in the index's rules, which do not use it)

        static AuxRules of(String text) throws java.io.IOException {
            JsonNode j = new ObjectMapper().readTree(text);
            AuxRules r = new AuxRules();
            r.scheduleTopic = j.path("scheduleTopic").asText("");
            r.nowMs = j.path("nowMs").asLong(0);
            j.path("delayOffsets").fields().forEachRemaining(e -> {
                HashMap<Integer, Long> m = new HashMap<>();
                e.getValue().fields().forEachRemaining(
                    q -> m.put(Integer.parseInt(q.getKey()), q.getValue().asLong()));
                r.delayOffsets.put(e.getKey(), m);
            });
            j.path("knownFrom").fields().forEachRemaining(e -> {
                if (!e.getValue().isNull()) {
                    r.known.put(e.getKey(), e.getValue().asLong());
                }
            });
            r.tallyNames = j.has("tallyNames") ? Rules.strings(j.get("tallyNames")) : null;
            r.delayUnitMs = j.path("delayUnitMs").asLong(0);  // the units' rules give it
            return r;
        }

        /** integrity._known: at or above the store's first commitlog offset, negative, or of a
         * store with no commitlog file. */
        boolean known(String store, long offset) {
            Long low = known.get(store);
            return low == null || offset >= low || offset < 0;
        }
    }

    /** One queue's aggregates (audits.queue_facts). */
    static final class QAcc implements Serializable {
        private static final long serialVersionUID = 1L;
        long min = Long.MAX_VALUE;
        long max = Long.MIN_VALUE;
        long entries;
        long pending;
        long overdue;
        boolean hasNext;
        long next = Long.MAX_VALUE;
        final UnitTally units = new UnitTally();

        void next(long v) {
            hasNext = true;
            next = Math.min(next, v);
        }

        void merge(QAcc o) {
            min = Math.min(min, o.min);
            max = Math.max(max, o.max);
            entries += o.entries;
            pending += o.pending;
            overdue += o.overdue;
            if (o.hasNext) {
                next(o.next);
            }
            units.merge(o.units);
        }
    }

    /** One partition of the consume queue: its queues' aggregates (audits.queue_facts), folded
     * as the reader reads each unit (no column written). A split is one queue's file. */
    static final class QueueFacts extends AuxDecoder {
        final AuxRules rules;
        final HashMap<List<Object>, QAcc> by = new HashMap<>();
        private QAcc a;
        private long eff;
        private boolean sched;
        private boolean tallies;
        private long prefix;  // unitPrefix of the split's queue
        private long known;  // the store's first commitlog offset (Long.MIN_VALUE: any)

        QueueFacts(List<CommitlogSource.SplitSpec> splits, AuxRules rules) {
            super(splits, new StructType(), "consumequeue", 16384);
            this.rules = rules;
        }

        HashMap<List<Object>, QAcc> fold() throws java.io.IOException {
            try {
                while (next()) {
                    continue;  // (each unit is folded as it is read)
                }
            } finally {
                close();
            }
            return by;
        }

        @Override
        protected void openSplit(long size) {
            String store = cur.store;
            int queue = (int) cur.base2;
            a = by.computeIfAbsent(Arrays.asList(store, cur.topic, queue), x -> new QAcc());
            HashMap<Integer, Long> levels = rules.delayOffsets.get(store);
            Long e = levels == null ? null : levels.get(queue);
            eff = e == null ? 0 : e;
            sched = cur.topic.equals(rules.scheduleTopic);
            tallies = rules.tallyNames != null;
            Long low = rules.known.get(store);
            known = low == null ? Long.MIN_VALUE : low;
            super.openSplit(size);  // (sets topicBytes)
            prefix = unitPrefix(topicBytes, 0, topicBytes.length, queue);
        }

        @Override
        void unit(int row, long fileOffset, long q, long o, int size, long t) {
            QAcc g = a;
            g.min = Math.min(g.min, q);
            g.max = Math.max(g.max, q);
            g.entries++;
            if (sched && q >= eff) {
                g.pending++;
                g.overdue += t < rules.nowMs ? 1 : 0;
                g.next(t);
            }
            if (tallies && (o >= known || o < 0)) {  // AuxRules.known
                g.units.add(1, unitHash(prefix, o, q, size,
                    sched ? Math.floorMod(t, rules.delayUnitMs) : t));
            }
        }
    }

    /** Per store, topic and queue of the consume queue: audits.queue_facts' rows, as JSON
     * [[[store, topic, queueId], {aggregates}], ...]. */
    public static String queues(JavaSparkContext jsc, String splits, String rulesJson)
            throws Exception {
        final AuxRules rules = AuxRules.of(rulesJson);
        return JSON.writeValueAsString(queueRows(perPartition(jsc, splits,
            p -> new QueueFacts(p, rules).fold()), rules));
    }

    /** The partitions' queues (QueueFacts#fold) merged, as queues() answers them. */
    static ArrayNode queueRows(List<HashMap<List<Object>, QAcc>> parts, AuxRules rules) {
        HashMap<List<Object>, QAcc> by = new HashMap<>();
        for (HashMap<List<Object>, QAcc> part : parts) {
            part.forEach((k, v) -> by.computeIfAbsent(k, x -> new QAcc()).merge(v));
        }
        ArrayNode out = JSON.createArrayNode();
        for (Map.Entry<List<Object>, QAcc> e : by.entrySet()) {
            ArrayNode row = out.addArray();
            row.add(JSON.valueToTree(e.getKey()));
            QAcc a = e.getValue();
            ObjectNode agg = row.addObject();
            agg.put("minOffset", a.min);
            agg.put("maxOffset", a.max + 1);
            agg.put("entries", a.entries);
            agg.put("pending", a.pending);
            agg.put("overdue", a.overdue);
            put(agg, "nextDeliverTimestamp", a.hasNext, a.next);
            if (rules.tallyNames != null) {
                a.units.put(agg, rules.tallyNames);
            }
        }
        return out;
    }

    /** One partition of the index: per store, the count and the three chunk sums of the
     * entries at known offsets (integrity.index_tallies), folded as the reader reads each
     * entry (no column written). */
    static final class IndexFacts extends AuxDecoder {
        final AuxRules rules;
        final HashMap<String, long[]> by = new HashMap<>();
        private long[] a;
        private long known;  // the store's first commitlog offset (Long.MIN_VALUE: any)

        IndexFacts(List<CommitlogSource.SplitSpec> splits, AuxRules rules) {
            super(splits, new StructType(), "index", 16384);
            this.rules = rules;
        }

        HashMap<String, long[]> fold() throws java.io.IOException {
            try {
                while (next()) {
                    continue;  // (each entry is folded as it is read)
                }
            } finally {
                close();
            }
            return by;
        }

        @Override
        protected void openSplit(long size) {
            a = by.computeIfAbsent(cur.store, x -> new long[4]);
            Long low = rules.known.get(cur.store);
            known = low == null ? Long.MIN_VALUE : low;
            super.openSplit(size);
        }

        @Override
        void entry(int row, long fileOffset, int keyHash, long o, int timeDiff, int prev) {
            if (o < known && o >= 0) {  // AuxRules.known
                return;  // not a finding: below the commitlog's start
            }
            long mask = (1L << CHUNK_BITS) - 1;
            long h = XXH64.hashInt(keyHash, XXH64.hashLong(o, SEED));  // integrity.entries_hash
            if (entry >= 2 && cur.base2 > 0) {  // integrity.entry_time_checked
                h = XXH64.hashInt(timeDiff, h);
            }
            if (prev < 0 || prev >= entry) {  // dispatch_rules.prev_index_bad
                h = XXH64.hashInt(prev, h);
            }
            long[] t = a;
            t[0]++;
            t[1] += h & mask;
            t[2] += (h >>> CHUNK_BITS) & mask;
            t[3] += h >>> (2 * CHUNK_BITS);
        }
    }

    /** Per store, the index entries' tallies (integrity.index_tallies): JSON {store: {name:
     * sum}} over the entries at known offsets; ``rulesJson`` names them ("tallyNames": count
     * and the three chunk sums) and says the stores' first offsets ("knownFrom"). */
    public static String index(JavaSparkContext jsc, String splits, String rulesJson)
            throws Exception {
        final AuxRules rules = AuxRules.of(rulesJson);
        return JSON.writeValueAsString(indexRows(perPartition(jsc, splits,
            p -> new IndexFacts(p, rules).fold()), rules));
    }

    /** The partitions' index tallies (IndexFacts#fold) summed, as index() answers them. */
    static ObjectNode indexRows(List<HashMap<String, long[]>> parts, AuxRules rules) {
        HashMap<String, long[]> by = new HashMap<>();
        for (HashMap<String, long[]> part : parts) {
            part.forEach((k, v) -> {
                long[] a = by.computeIfAbsent(k, x -> new long[4]);
                for (int i = 0; i < 4; i++) {
                    a[i] += v[i];
                }
            });
        }
        ObjectNode out = JSON.createObjectNode();
        for (Map.Entry<String, long[]> e : by.entrySet()) {
            if (e.getValue()[0] == 0) {
                continue;  // no entry counted: no group (as the SQL's filter before its groupBy)
            }
            ObjectNode t = out.putObject(e.getKey());
            for (int i = 0; i < 4; i++) {
                t.put(rules.tallyNames[i], e.getValue()[i]);
            }
        }
        return out;
    }

    // --- the three in one job ----------------------------------------------------------------

    /** One task's share of scan(): its commitlog splits, consume-queue files and index
     * files (each list possibly empty). */
    static final class Share implements Serializable {
        private static final long serialVersionUID = 1L;
        final ArrayList<CommitlogSource.SplitSpec> commitlog;
        final ArrayList<CommitlogSource.SplitSpec> queues;
        final ArrayList<CommitlogSource.SplitSpec> index;

        Share(ArrayList<CommitlogSource.SplitSpec> commitlog,
              ArrayList<CommitlogSource.SplitSpec> queues,
              ArrayList<CommitlogSource.SplitSpec> index) {
            this.commitlog = commitlog;
            this.queues = queues;
            this.index = index;
        }
    }

    /** What one task of scan() answers: the folds of its share (null: none to fold). */
    static final class Folded implements Serializable {
        private static final long serialVersionUID = 1L;
        List<Object[]> facts;
        HashMap<List<Object>, QAcc> queues;
        HashMap<String, long[]> index;
    }

    private static ArrayList<CommitlogSource.SplitSpec> partOf(
            List<ArrayList<CommitlogSource.SplitSpec>> parts, int k) {
        return k < parts.size() ? parts.get(k) : new ArrayList<>();
    }

    /** run(), queues() and index() in one Spark job: task k folds partition k of each of
     * ``commitlogSplits``, ``queueSplits`` and ``indexSplits`` (their lines number the
     * partitions of this one job; an empty string: nothing of that source). An empty rules
     * string leaves its source out. Returns JSON {"facts": run()'s answer, "queues":
     * queues()', "index": index()'}, with the sources computed. */
    public static String scan(JavaSparkContext jsc, String commitlogSplits, String readerOptions,
                              String rulesJson, String queueSplits, String queueRulesJson,
                              String indexSplits, String indexRulesJson) throws Exception {
        final CommitlogSource.Options opts = readerOptions(readerOptions);
        final Rules rules = rulesJson.isEmpty() ? null : Rules.of(rulesJson);
        final AuxRules qRules = queueRulesJson.isEmpty() ? null : AuxRules.of(queueRulesJson);
        final AuxRules iRules = indexRulesJson.isEmpty() ? null : AuxRules.of(indexRulesJson);
        List<ArrayList<CommitlogSource.SplitSpec>> cl = CommitlogSource.parts(
            rules == null ? "" : commitlogSplits);
        List<ArrayList<CommitlogSource.SplitSpec>> cq = CommitlogSource.parts(
            qRules == null ? "" : queueSplits);
        List<ArrayList<CommitlogSource.SplitSpec>> ix = CommitlogSource.parts(
            iRules == null ? "" : indexSplits);
        int n = Math.max(cl.size(), Math.max(cq.size(), ix.size()));
        List<Share> shares = new ArrayList<>();
        for (int k = 0; k < n; k++) {
            shares.add(new Share(partOf(cl, k), partOf(cq, k), partOf(ix, k)));
        }
        List<Folded> parts = n == 0 ? new ArrayList<>()
            : jsc.parallelize(shares, n).map(share -> {
                Folded f = new Folded();
                if (!share.commitlog.isEmpty()) {
                    f.facts = new CommitlogFacts(share.commitlog, opts, rules).fold();
                }
                if (!share.queues.isEmpty()) {
                    f.queues = new QueueFacts(share.queues, qRules).fold();
                }
                if (!share.index.isEmpty()) {
                    f.index = new IndexFacts(share.index, iRules).fold();
                }
                return f;
            }).collect();
        List<List<Object[]>> facts = new ArrayList<>();
        List<HashMap<List<Object>, QAcc>> queues = new ArrayList<>();
        List<HashMap<String, long[]>> index = new ArrayList<>();
        for (Folded f : parts) {
            if (f.facts != null) {
                facts.add(f.facts);
            }
            if (f.queues != null) {
                queues.add(f.queues);
            }
            if (f.index != null) {
                index.add(f.index);
            }
        }
        ObjectNode out = JSON.createObjectNode();
        if (rules != null) {
            out.set("facts", factRows(facts, rules));
        }
        if (qRules != null) {
            out.set("queues", queueRows(queues, qRules));
        }
        if (iRules != null) {
            out.set("index", indexRows(index, iRules));
        }
        return JSON.writeValueAsString(out);
    }
}
