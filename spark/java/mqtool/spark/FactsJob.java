// The aggregations of `mqtool scan` as Spark jobs over mqtool's reader, with no SQL plan, each
// giving the rows of the Spark SQL it stands for:
// - run: the commitlog's facts, mqtool.spark.audits.message_facts (the grouping sets of
//   audits.FACT_SETS, the tallies of integrity.message_tallies);
// - queues: the consume queue's, audits.queue_facts (with integrity.unit_tallies);
// - index: the index entries' tallies, integrity.index_tallies.
// Each is one job: an RDD of the reader's partitions, one task per partition folding the
// reader's batches into a hash aggregation, the partitions' groups merged on the driver.
//
// Why: a cold JVM pays for Catalyst (analysis, optimisation, whole-stage code generation, the
// adaptive re-planning of each stage) and for compiling the generated code, seconds that no
// store size amortises for a scan that runs once (spark/README.md).
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
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.sql.vectorized.ColumnarMap;
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
        String[] rareColumns;  // audits.RARE_COLUMNS: the columns a rare row keeps
        HashMap<String, long[]> indexSpans = new HashMap<>();  // store -> [lo, hi]

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

    /** integrity._unit_hash of row ``r``: xxhash64(commitLogOffset, topic, queueId,
     * queueOffset, storeSize) as Spark computes it (a null column skipped); the same over a
     * message and over its consume-queue unit. */
    static long unitHash(ColumnVector off, ColumnVector topic, ColumnVector qid, ColumnVector qo,
                         ColumnVector size, int r) {
        long h = XXH64.hashLong(off.getLong(r), SEED);
        h = topic.isNullAt(r) ? h : XXH64.hashUTF8String(topic.getUTF8String(r), h);
        h = qid.isNullAt(r) ? h : XXH64.hashInt(qid.getInt(r), h);
        h = qo.isNullAt(r) ? h : XXH64.hashLong(qo.getLong(r), h);
        return size.isNullAt(r) ? h : XXH64.hashInt(size.getInt(r), h);
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

    /** One record's grouping keys (audits.message_facts' "keyed" projection): a mutable probe
     * in the record loop, copied when it starts a group. */
    static final class Key {
        UTF8String store;
        int storeHash;  // store.hashCode(), which the record loop keeps per store
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

        Key copy() {
            Key k = new Key();
            k.store = clone(store);
            k.storeHash = storeHash;
            k.kind = clone(kind);
            k.topic = clone(topic);
            k.hasQueueId = hasQueueId;
            k.queueId = queueId;
            k.hasBucket = hasBucket;
            k.bucket = bucket;
            k.dlqGroup = clone(dlqGroup);
            k.originalTopic = clone(originalTopic);
            k.retryGroup = clone(retryGroup);
            k.hasReconsume = hasReconsume;
            k.reconsumeTimes = reconsumeTimes;
            k.x = x;
            return k;
        }

        private static UTF8String clone(UTF8String s) {
            return s == null ? null : s.clone();  // the reader's strings point into its arena
        }

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

    /** One partition's record loop: the records of ``part`` grouped by every key at once (as
     * message_facts' first aggregation), then folded into the grouping sets. */
    static final class Loop implements Folder<List<Object[]>> {
        final Rules rules;
        final HashMap<Key, Acc> fine = new HashMap<>();  // by every key at once
        final List<HashMap<List<Object>, Acc>> sets = new ArrayList<>();  // by SETS[i]
        final Key probe = new Key();
        int cType, cStore, cTopic, cQueueId, cQueueOffset, cSize, cStoreTs, cReconsume, cCrcOk;
        int cSysFlag, cClOffset, cProps, cKeys, cUniq;
        final int[] cX;
        final DataType[] tX;
        private UTF8String lastStore;
        private int lastStoreHash;
        private UTF8String spanStore;  // the last store whose index span was looked up
        private long[] span;

        Loop(Rules rules, StructType schema) {
            this.rules = rules;
            for (int s = 0; s < SETS.length; s++) {
                sets.add(new HashMap<>());
            }
            cType = schema.fieldIndex("recordType");
            cStore = schema.fieldIndex("store");
            cTopic = schema.fieldIndex("topic");
            cQueueId = schema.fieldIndex("queueId");
            cQueueOffset = schema.fieldIndex("queueOffset");
            cSize = schema.fieldIndex("storeSize");
            cStoreTs = schema.fieldIndex("storeTimestamp");
            cReconsume = schema.fieldIndex("reconsumeTimes");
            cCrcOk = schema.fieldIndex("crcOk");
            cSysFlag = schema.fieldIndex("sysFlag");
            cClOffset = schema.fieldIndex("commitLogOffset");
            cProps = schema.fieldIndex("properties");
            cKeys = rules.tallies() ? schema.fieldIndex("keys") : -1;
            cUniq = rules.tallies() ? schema.fieldIndex("uniqKey") : -1;
            cX = new int[rules.rareColumns.length];
            tX = new DataType[cX.length];
            for (int i = 0; i < cX.length; i++) {
                cX[i] = schema.fieldIndex(rules.rareColumns[i]);
                tX[i] = schema.fields()[cX[i]].dataType();
            }
        }

        @Override
        public void add(ColumnarBatch b) {
            ColumnVector type = b.column(cType), store = b.column(cStore), topic = b.column(cTopic);
            ColumnVector qid = b.column(cQueueId), qo = b.column(cQueueOffset);
            ColumnVector size = b.column(cSize), ts = b.column(cStoreTs);
            ColumnVector rt = b.column(cReconsume), crcOk = b.column(cCrcOk);
            ColumnVector sys = b.column(cSysFlag), off = b.column(cClOffset);
            ColumnVector props = b.column(cProps);
            int n = b.numRows();
            Key k = probe;
            for (int r = 0; r < n; r++) {
                UTF8String kind = type.getUTF8String(r);
                boolean isMsg = kind.equals(rules.kindMessage);
                UTF8String t = topic.isNullAt(r) ? null : topic.getUTF8String(r);
                k.store = store.isNullAt(r) ? null : store.getUTF8String(r);
                if (k.store == null || !k.store.equals(lastStore)) {  // murmur once per store
                    lastStore = k.store == null ? null : k.store.clone();
                    lastStoreHash = k.store == null ? 0 : k.store.hashCode();
                }
                k.storeHash = lastStoreHash;
                k.kind = kind;
                k.topic = isMsg ? t : null;
                k.hasQueueId = isMsg && !qid.isNullAt(r);
                k.queueId = k.hasQueueId ? qid.getInt(r) : 0;
                boolean hasTs = !ts.isNullAt(r);
                long tsv = hasTs ? ts.getLong(r) : 0;
                k.hasBucket = isMsg && hasTs;
                k.bucket = k.hasBucket ? Math.floorDiv(tsv, rules.bucketMs) * rules.bucketMs : 0;
                boolean dlq = isMsg && t != null && t.startsWith(rules.dlqPrefix);
                boolean retry = isMsg && t != null && t.startsWith(rules.retryPrefix);
                k.dlqGroup = dlq ? t.substring(rules.dlqPrefix.numChars(), t.numChars()) : null;
                k.originalTopic = dlq ? originalTopic(props, r) : null;
                k.retryGroup = retry
                    ? t.substring(rules.retryPrefix.numChars(), t.numChars()) : null;
                k.hasReconsume = retry && !rt.isNullAt(r);
                k.reconsumeTimes = k.hasReconsume ? rt.getInt(r) : 0;
                String xKind = null;
                if (kind.equals(rules.kindUnreadable) || kind.equals(rules.kindDeferred)) {
                    xKind = kind.toString();
                } else if (isMsg && !crcOk.isNullAt(r) && !crcOk.getBoolean(r)) {
                    xKind = rules.crcRow;
                }
                k.x = xKind == null ? null : rare(b, r, xKind);
                Acc a = fine.get(k);
                if (a == null) {
                    a = new Acc();
                    if (fine.size() >= rules.fineMax) {
                        flush();
                    }
                    fine.put(k.copy(), a);
                }
                a.count++;
                if (isMsg && !size.isNullAt(r)) {
                    a.bytes(size.getInt(r));
                }
                if (hasTs) {
                    a.ts(tsv);
                }
                if (!qo.isNullAt(r)) {
                    a.qo(qo.getLong(r));
                }
                if (rules.tallies() && isMsg) {
                    tally(a, b, r, topic, sys, off, qid, qo, size);
                }
            }
        }

        /** coalesce(properties[RETRY_TOPIC], properties[REAL_TOPIC], ""): the first pair of a
         * name, as Spark's map lookup. */
        private UTF8String originalTopic(ColumnVector props, int r) {
            if (!props.isNullAt(r)) {
                ColumnarMap m = props.getMap(r);
                for (UTF8String name : rules.originalTopicFrom) {
                    for (int i = 0; i < m.numElements(); i++) {
                        if (m.keyArray().getUTF8String(i).equals(name)) {
                            if (!m.valueArray().isNullAt(i)) {
                                return m.valueArray().getUTF8String(i);
                            }
                            break;
                        }
                    }
                }
            }
            return UTF8String.EMPTY_UTF8;
        }

        private Object[] rare(ColumnarBatch b, int r, String xKind) {
            Object[] x = new Object[cX.length + 1];
            x[0] = xKind;
            for (int i = 0; i < cX.length; i++) {
                ColumnVector c = b.column(cX[i]);
                if (c.isNullAt(r)) {
                    continue;
                }
                DataType t = tX[i];
                if (t.equals(DataTypes.IntegerType)) {
                    x[i + 1] = c.getInt(r);
                } else if (t.equals(DataTypes.LongType)) {
                    x[i + 1] = c.getLong(r);
                } else if (t.equals(DataTypes.StringType)) {
                    x[i + 1] = c.getUTF8String(r).toString();
                } else {
                    throw new IllegalArgumentException("rare-row column of type " + t);
                }
            }
            return x;
        }

        /** integrity.message_tallies for one message. */
        private void tally(Acc a, ColumnarBatch b, int r, ColumnVector topic, ColumnVector sys,
                           ColumnVector off, ColumnVector qid, ColumnVector qo, ColumnVector size) {
            int txn = sys.getInt(r) & rules.txnMask;
            boolean getsUnit = true;
            for (int v : rules.notInConsumeQueue) {
                getsUnit &= txn != v;
            }
            long offset = off.getLong(r);
            if (getsUnit) {
                a.units.add(1, unitHash(off, topic, qid, qo, size, r));
            }
            long[] span = span(b, r);
            if (txn != rules.txnRollback && span != null && offset >= span[0]
                    && offset <= span[1]) {
                long w = keyCount(b, r);
                long h = XXH64.hashLong(offset, SEED);
                long mask = (1L << CHUNK_BITS) - 1;
                a.entries(w, (h & mask) * w, ((h >>> CHUNK_BITS) & mask) * w,
                    (h >>> (2 * CHUNK_BITS)) * w);
            }
        }

        /** The index span of the row's store (integrity.index_spans), or null. */
        private long[] span(ColumnarBatch b, int r) {
            ColumnVector s = b.column(cStore);
            if (s.isNullAt(r)) {
                return null;
            }
            UTF8String store = s.getUTF8String(r);
            if (!store.equals(spanStore)) {
                spanStore = store.clone();
                span = rules.indexSpans.get(store.toString());
            }
            return span;
        }

        /** integrity.index_key_count: one for a UNIQ_KEY, one per non-empty KEYS token. */
        private long keyCount(ColumnarBatch b, int r) {
            long n = b.column(cUniq).isNullAt(r) ? 0 : 1;
            ColumnVector keys = b.column(cKeys);
            if (keys.isNullAt(r)) {
                return n;
            }
            UTF8String v = keys.getUTF8String(r);  // its bytes where they are, not a copy
            Object base = v.getBaseObject();
            long at = v.getBaseOffset();
            int run = 0;
            for (int i = 0; i < v.numBytes(); i++) {
                if (Platform.getByte(base, at + i) == rules.keySeparator) {
                    n += run > 0 ? 1 : 0;
                    run = 0;
                } else {
                    run++;
                }
            }
            return n + (run > 0 ? 1 : 0);
        }

        /** The fine groups folded into the grouping sets (set -> key -> aggregates), and
         * emptied: their number is bounded (Rules.fineMax), so what a task keeps grows only
         * with the sets' own groups (queues, topics x minutes, ...). */
        private void flush() {
            for (Map.Entry<Key, Acc> e : fine.entrySet()) {
                for (int s = 0; s < SETS.length; s++) {
                    sets.get(s).computeIfAbsent(e.getKey().of(s, rules.rareColumns.length), x -> new Acc())
                        .merge(e.getValue());
                }
            }
            fine.clear();
        }

        @Override
        public List<Object[]> result() {
            flush();
            List<Object[]> out = new ArrayList<>();
            for (int s = 0; s < SETS.length; s++) {
                for (Map.Entry<List<Object>, Acc> e : sets.get(s).entrySet()) {
                    out.add(new Object[] {s, new ArrayList<>(e.getKey()), e.getValue()});
                }
            }
            return out;
        }
    }

    /** One partition's fold of its batches into a result the driver merges. */
    interface Folder<R> {
        void add(ColumnarBatch b);

        R result();
    }

    interface Open extends Serializable {
        PartitionReader<ColumnarBatch> open(List<CommitlogSource.SplitSpec> splits)
            throws java.io.IOException;
    }

    interface NewFolder<R> extends Serializable {
        Folder<R> make();
    }

    /** One Spark job, a task per partition of ``splits`` (CommitlogSource's option "splits"):
     * the partition's reader folded batch by batch; the partitions' results, in order. */
    static <R> List<R> perPartition(JavaSparkContext jsc, String splits, Open open,
                                    NewFolder<R> folder) {
        List<ArrayList<CommitlogSource.SplitSpec>> parts = CommitlogSource.parts(splits);
        if (parts.isEmpty()) {
            return new ArrayList<>();
        }
        return jsc.parallelize(parts, parts.size()).map(part -> {
            Folder<R> f = folder.make();
            PartitionReader<ColumnarBatch> d = open.open(part);
            try {
                while (d.next()) {
                    f.add(d.get());
                }
            } finally {
                d.close();
            }
            return f.result();
        }).collect();
    }

    /** The commitlog's facts: ``splits`` and ``schemaJson`` as CommitlogSource's options
     * "splits" and "schema", ``readerOptions`` its other options (JSON object), ``rulesJson``
     * the Rules. Returns the grouping-set rows as JSON: [[set, [key values], {aggregates}]]. */
    public static String run(JavaSparkContext jsc, String splits, String schemaJson,
                             String readerOptions, String rulesJson) throws Exception {
        ObjectMapper json = new ObjectMapper();
        final StructType schema = (StructType) DataType.fromJson(schemaJson);
        HashMap<String, String> o = new HashMap<>();
        json.readTree(readerOptions).fields()
            .forEachRemaining(e -> o.put(e.getKey(), e.getValue().asText()));
        final CommitlogSource.Options opts =
            new CommitlogSource.Options(new CaseInsensitiveStringMap(o));
        final Rules rules = Rules.of(rulesJson);
        List<List<Object[]>> parts = perPartition(jsc, splits,
            part -> new CommitlogDecoder(part, schema, opts), () -> new Loop(rules, schema));
        // merge the partitions' rows per set and key
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
        ArrayNode out = json.createArrayNode();
        for (int s = 0; s < SETS.length; s++) {
            for (Map.Entry<List<Object>, Acc> e : by.get(s).entrySet()) {
                ArrayNode row = out.addArray();
                row.add(SETS[s]);
                row.add(json.valueToTree(e.getKey()));
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
        return json.writeValueAsString(out);
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

    /** One partition of the consume queue: its queues' aggregates (audits.queue_facts). */
    static final class QueueLoop implements Folder<HashMap<List<Object>, QAcc>> {
        final AuxRules rules;
        final HashMap<List<Object>, QAcc> by = new HashMap<>();
        final int cStore, cTopic, cQid, cQo, cOff, cSize, cTags;

        QueueLoop(AuxRules rules, StructType schema) {
            this.rules = rules;
            cStore = schema.fieldIndex("store");
            cTopic = schema.fieldIndex("topic");
            cQid = schema.fieldIndex("queueId");
            cQo = schema.fieldIndex("queueOffset");
            cOff = schema.fieldIndex("commitLogOffset");
            cSize = schema.fieldIndex("storeSize");
            cTags = schema.fieldIndex("tagsCode");
        }

        @Override
        public void add(ColumnarBatch b) {
            ColumnVector st = b.column(cStore), tp = b.column(cTopic), qid = b.column(cQid);
            ColumnVector qo = b.column(cQo), off = b.column(cOff), size = b.column(cSize);
            ColumnVector tags = b.column(cTags);
            UTF8String stU = null, tpU = null;
            String store = null;
            int queue = 0;
            QAcc a = null;
            long eff = 0;
            boolean sched = false;
            for (int r = 0; r < b.numRows(); r++) {
                // one file is one queue: look the group up when it changes
                if (a == null || queue != qid.getInt(r) || !st.getUTF8String(r).equals(stU)
                        || !tp.getUTF8String(r).equals(tpU)) {
                    stU = st.getUTF8String(r).clone();
                    tpU = tp.getUTF8String(r).clone();
                    store = stU.toString();
                    String topic = tpU.toString();
                    queue = qid.getInt(r);
                    a = by.computeIfAbsent(Arrays.asList(store, topic, queue), x -> new QAcc());
                    HashMap<Integer, Long> levels = rules.delayOffsets.get(store);
                    Long e = levels == null ? null : levels.get(queue);
                    eff = e == null ? 0 : e;
                    sched = topic.equals(rules.scheduleTopic);
                }
                long q = qo.getLong(r);
                long t = tags.getLong(r);
                a.min = Math.min(a.min, q);
                a.max = Math.max(a.max, q);
                a.entries++;
                if (sched && q >= eff) {
                    a.pending++;
                    a.overdue += t < rules.nowMs ? 1 : 0;
                    a.next(t);
                }
                long o = off.getLong(r);
                if (rules.tallyNames != null && rules.known(store, o)) {
                    a.units.add(1, unitHash(off, tp, qid, qo, size, r));
                }
            }
        }

        @Override
        public HashMap<List<Object>, QAcc> result() {
            return by;
        }
    }

    /** Per store, topic and queue of the consume queue: audits.queue_facts' rows, as JSON
     * [[[store, topic, queueId], {aggregates}], ...]. */
    public static String queues(JavaSparkContext jsc, String splits, String schemaJson,
                                String rulesJson) throws Exception {
        final StructType schema = (StructType) DataType.fromJson(schemaJson);
        final AuxRules rules = AuxRules.of(rulesJson);
        HashMap<List<Object>, QAcc> by = new HashMap<>();
        for (HashMap<List<Object>, QAcc> part : perPartition(jsc, splits,
                p -> new AuxDecoder(p, schema, "consumequeue", 16384),
                () -> new QueueLoop(rules, schema))) {
            part.forEach((k, v) -> by.computeIfAbsent(k, x -> new QAcc()).merge(v));
        }
        ObjectMapper json = new ObjectMapper();
        ArrayNode out = json.createArrayNode();
        for (Map.Entry<List<Object>, QAcc> e : by.entrySet()) {
            ArrayNode row = out.addArray();
            row.add(json.valueToTree(e.getKey()));
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
        return json.writeValueAsString(out);
    }

    /** One partition of the index: per store, the count and the three chunk sums of the
     * entries at known offsets (integrity.index_tallies). */
    static final class IndexLoop implements Folder<HashMap<String, long[]>> {
        final AuxRules rules;
        final HashMap<String, long[]> by = new HashMap<>();
        final int cStore, cOff;

        IndexLoop(AuxRules rules, StructType schema) {
            this.rules = rules;
            cStore = schema.fieldIndex("store");
            cOff = schema.fieldIndex("commitLogOffset");
        }

        @Override
        public void add(ColumnarBatch b) {
            ColumnVector st = b.column(cStore), off = b.column(cOff);
            long mask = (1L << CHUNK_BITS) - 1;
            UTF8String stU = null;
            String store = null;
            long[] a = null;
            for (int r = 0; r < b.numRows(); r++) {
                if (a == null || !st.getUTF8String(r).equals(stU)) {
                    stU = st.getUTF8String(r).clone();
                    store = stU.toString();
                    a = by.computeIfAbsent(store, x -> new long[4]);
                }
                long o = off.getLong(r);
                if (!rules.known(store, o)) {
                    continue;  // not a finding: below the commitlog's start
                }
                long h = XXH64.hashLong(o, SEED);
                a[0]++;
                a[1] += h & mask;
                a[2] += (h >>> CHUNK_BITS) & mask;
                a[3] += h >>> (2 * CHUNK_BITS);
            }
        }

        @Override
        public HashMap<String, long[]> result() {
            return by;
        }
    }

    /** Per store, the index entries' tallies (integrity.index_tallies): JSON {store: {name:
     * sum}} over the entries at known offsets; ``rulesJson`` names them ("tallyNames": count
     * and the three chunk sums) and says the stores' first offsets ("knownFrom"). */
    public static String index(JavaSparkContext jsc, String splits, String schemaJson,
                               String rulesJson) throws Exception {
        final StructType schema = (StructType) DataType.fromJson(schemaJson);
        final AuxRules rules = AuxRules.of(rulesJson);
        HashMap<String, long[]> by = new HashMap<>();
        for (HashMap<String, long[]> part : perPartition(jsc, splits,
                p -> new AuxDecoder(p, schema, "index", 16384),
                () -> new IndexLoop(rules, schema))) {
            part.forEach((k, v) -> {
                long[] a = by.computeIfAbsent(k, x -> new long[4]);
                for (int i = 0; i < 4; i++) {
                    a[i] += v[i];
                }
            });
        }
        ObjectMapper json = new ObjectMapper();
        ObjectNode out = json.createObjectNode();
        for (Map.Entry<String, long[]> e : by.entrySet()) {
            if (e.getValue()[0] == 0) {
                continue;  // no entry counted: no group (as the SQL's filter before its groupBy)
            }
            ObjectNode t = out.putObject(e.getKey());
            for (int i = 0; i < 4; i++) {
                t.put(rules.tallyNames[i], e.getValue()[i]);
            }
        }
        return json.writeValueAsString(out);
    }
}
