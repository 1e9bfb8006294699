// mqtool's Spark-native commitlog reader: a DataSource V2 source producing ColumnarBatch.
//
// Built by `make dev` (javac against the jars pyspark ships, see the Makefile) into
// spark/jars/mqtool-spark.jar; mqtool.spark.session puts that jar on the session and
// mqtool.spark.source.load uses it for the `records` table. The schema comes from Python
// (mqtool.spark.schema, option "schema", JSON): defined once. The splits come from Python too
// (mqtool.spark.splits, option "splits"): planned once.
//
// Damage is not judged here. CommitlogDecoder accepts only records that pass every check of
// mqtool.formats.commitlog_fields.scan (which are those of formats.commitlog.parse_message plus the
// PHYSICALOFFSET rule of formats.walker), the file's BLANK record and zeros up to the end of
// the file's data. Anything else becomes one "deferred" row (recordType "deferred",
// fileOffset = where, storeSize = bytes to the split end, detail "chain" or "resync") that
// mqtool.spark.source hands to the Python decoder (spark/decode.py, formats.walker: the one
// damage rule) for that byte range.
package mqtool.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.vectorized.ColumnarBatch;

public final class CommitlogSource implements TableProvider, DataSourceRegister {

    @Override
    public String shortName() {
        return "mqtool-commitlog";
    }

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return (StructType) DataType.fromJson(options.get("schema"));
    }

    @Override
    public boolean supportsExternalMetadata() {
        return true;
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> props) {
        return new CommitlogTable(schema);
    }

    /** One split: a byte range of one commitlog file (see mqtool.spark.splits.Split), or one
     * consume-queue or index file (AuxDecoder). */
    public static final class SplitSpec implements Serializable {
        private static final long serialVersionUID = 1L;
        final String path;
        final String store;
        final String name;
        final long base;
        final long start;
        final long end;
        final long dataEnd;
        final long base2;  // consume queue: the queue id; index: the header's beginTimestamp
        final String topic;  // consume queue: the topic

        SplitSpec(String[] f) {
            path = f[1];
            store = f[2];
            name = f[3];
            base = Long.parseLong(f[4]);
            start = Long.parseLong(f[5]);
            end = Long.parseLong(f[6]);
            dataEnd = Long.parseLong(f[7]);
            base2 = dataEnd;
            topic = f.length > 8 ? f[8] : "";
        }
    }

    /** The option "splits" (see CommitlogScan#planInputPartitions) as each partition's
     * splits. */
    static List<ArrayList<SplitSpec>> parts(String lines) {
        List<ArrayList<SplitSpec>> parts = new ArrayList<>();
        for (String line : lines.split("\n")) {
            if (line.isEmpty()) {
                continue;
            }
            String[] f = line.split("\t", -1);
            int k = Integer.parseInt(f[0]);
            while (parts.size() <= k) {
                parts.add(new ArrayList<>());
            }
            parts.get(k).add(new SplitSpec(f));
        }
        return parts;
    }

    /** What every reader of one scan is told (serialised to the executors). */
    public static final class Options implements Serializable {
        private static final long serialVersionUID = 1L;
        final boolean checkCrc;
        final String[] propertiesFor;
        final int batchRows;
        final String table;

        Options(CaseInsensitiveStringMap o) {
            table = o.getOrDefault("table", "records");
            checkCrc = !"false".equalsIgnoreCase(o.getOrDefault("checkCrc", "true"));
            String pf = o.getOrDefault("propertiesFor", "");
            propertiesFor = pf.isEmpty() ? new String[0] : pf.split(",");
            batchRows = Integer.parseInt(o.getOrDefault("batchRows", "4096"));
        }
    }

    static final class CommitlogTable implements SupportsRead {
        private final StructType schema;

        CommitlogTable(StructType schema) {
            this.schema = schema;
        }

        @Override
        public String name() {
            return "mqtool-commitlog";
        }

        @Override
        public StructType schema() {
            return schema;
        }

        @Override
        public Set<TableCapability> capabilities() {
            return EnumSet.of(TableCapability.BATCH_READ);
        }

        @Override
        public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
            return new Builder(schema, options);
        }
    }

    static final class Builder implements ScanBuilder, SupportsPushDownRequiredColumns {
        private StructType schema;
        private final CaseInsensitiveStringMap options;

        Builder(StructType schema, CaseInsensitiveStringMap options) {
            this.schema = schema;
            this.options = options;
        }

        @Override
        public void pruneColumns(StructType required) {
            schema = required;
        }

        @Override
        public Scan build() {
            return new CommitlogScan(schema, options);
        }
    }

    static final class CommitlogScan implements Scan, Batch {
        private final StructType schema;
        private final CaseInsensitiveStringMap options;

        CommitlogScan(StructType schema, CaseInsensitiveStringMap options) {
            this.schema = schema;
            this.options = options;
        }

        @Override
        public StructType readSchema() {
            return schema;
        }

        @Override
        public String description() {
            return "mqtool commitlog";
        }

        @Override
        public Batch toBatch() {
            return this;
        }

        /** Option "splits": one line per split, "partition\tpath\tstore\tname\tbase\tstart\tend\tdataEnd"
         * (table "records"); "...\tstart\tend\tqueueId\ttopic" (table "consumequeue");
         * "...\tentry 1's position\tend of the last used entry\tbeginTimestamp" ("index"). */
        @Override
        public InputPartition[] planInputPartitions() {
            List<ArrayList<SplitSpec>> parts = parts(options.getOrDefault("splits", ""));
            InputPartition[] out = new InputPartition[Math.max(parts.size(), 1)];
            for (int i = 0; i < out.length; i++) {
                out[i] = new Part(i < parts.size() ? parts.get(i) : new ArrayList<>());
            }
            return out;
        }

        @Override
        public PartitionReaderFactory createReaderFactory() {
            return new Factory(schema, new Options(options));
        }
    }

    static final class Part implements InputPartition {
        private static final long serialVersionUID = 1L;
        final ArrayList<SplitSpec> splits;

        Part(List<SplitSpec> splits) {
            this.splits = new ArrayList<>(splits);
        }
    }

    static final class Factory implements PartitionReaderFactory {
        private static final long serialVersionUID = 1L;
        private final StructType schema;
        private final Options options;

        Factory(StructType schema, Options options) {
            this.schema = schema;
            this.options = options;
        }

        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            throw new UnsupportedOperationException("mqtool-commitlog reads columnar batches only");
        }

        @Override
        public boolean supportColumnarReads(InputPartition partition) {
            return true;
        }

        @Override
        public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
            List<SplitSpec> splits = ((Part) partition).splits;
            if ("records".equals(options.table)) {
                return new CommitlogDecoder(splits, schema, options);
            }
            return new AuxDecoder(splits, schema, options.table, options.batchRows);
        }
    }
}
