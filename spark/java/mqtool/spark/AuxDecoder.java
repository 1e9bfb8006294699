// Consume-queue units and index entries for mqtool's Spark-native reader (see
// CommitlogSource.java, option "table" = "consumequeue" or "index").
//
// Both are fixed-size big-endian units; the rules stay in Python, which plans every split:
// - consume queue (mqtool.spark.auxfiles.decode_cq_file): the file's whole 20-byte units
//   (offset i64, size i32, tagsCode i64) up to the first all-zero unit (unwritten space);
//   queueOffset = (the file's base + the unit's position) / 20;
// - index (mqtool.spark.auxfiles.decode_index_file): the driver reads the header and the
//   geometry (mqtool.formats.indexfile) and says where entry 1 sits and how many entries are
//   used; here entries 1 .. count-1 (keyHash i32, phyOffset i64, timeDiff i32, prevIndex i32).
// Columns are those of mqtool.spark.schema.CQ_SCHEMA / INDEX_SCHEMA, value for value
// (tests/spark/test_spark_java.py compares them with the Python data source).
package mqtool.spark;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.util.List;

import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

final class AuxDecoder implements PartitionReader<ColumnarBatch> {
    static final int UNIT = 20;

    private final List<CommitlogSource.SplitSpec> splits;
    private final boolean index;
    private final WritableColumnVector[] vectors;
    private final ColumnarBatch batch;
    private final int cap;
    private final int cStore, cFile, cFileOffset, cTopic, cQueueId, cQueueOffset, cClOffset;
    private final int cSize, cTags, cEntry, cKeyHash, cTimeDiff, cPrev, cBegin;

    private int next = 0;
    private CommitlogSource.SplitSpec cur;
    private byte[] storeBytes, nameBytes, topicBytes;
    private final ByteBuffer buf;
    private FileChannel ch;
    private RandomAccessFile raf;
    private long pos;      // file position of the next unit
    private long stop;     // file position where this split's units end
    private long entry;    // index: the number of the next entry
    private boolean done = true;

    AuxDecoder(List<CommitlogSource.SplitSpec> splits, StructType schema, String table,
               int batchRows) {
        this.splits = splits;
        this.index = "index".equals(table);
        this.cap = batchRows;
        this.vectors = OnHeapColumnVector.allocateColumns(cap, schema);
        this.batch = new ColumnarBatch(vectors);
        this.buf = ByteBuffer.allocate(cap * UNIT).order(ByteOrder.BIG_ENDIAN);
        cStore = idx(schema, "store");
        cFile = idx(schema, "file");
        cFileOffset = idx(schema, "fileOffset");
        cTopic = idx(schema, "topic");
        cQueueId = idx(schema, "queueId");
        cQueueOffset = idx(schema, "queueOffset");
        cClOffset = idx(schema, "commitLogOffset");
        cSize = idx(schema, "storeSize");
        cTags = idx(schema, "tagsCode");
        cEntry = idx(schema, "entry");
        cKeyHash = idx(schema, "keyHash");
        cTimeDiff = idx(schema, "timeDiff");
        cPrev = idx(schema, "prevIndex");
        cBegin = idx(schema, "beginTimestamp");
    }

    private static int idx(StructType s, String name) {
        String[] names = s.fieldNames();
        for (int i = 0; i < names.length; i++) {
            if (names[i].equals(name)) {
                return i;
            }
        }
        return -1;
    }

    @Override
    public boolean next() throws IOException {
        for (WritableColumnVector v : vectors) {
            v.reset();
        }
        int n = 0;
        while (n < cap) {
            if (done) {
                closeFile();
                if (next >= splits.size()) {
                    break;
                }
                open(splits.get(next++));
                continue;
            }
            n = fill(n);
        }
        batch.setNumRows(n);
        return n > 0;
    }

    @Override
    public ColumnarBatch get() {
        return batch;
    }

    @Override
    public void close() throws IOException {
        closeFile();
        batch.close();
    }

    private void closeFile() throws IOException {
        ch = null;
        if (raf != null) {
            raf.close();
            raf = null;
        }
    }

    private void open(CommitlogSource.SplitSpec s) throws IOException {
        cur = s;
        storeBytes = s.store.getBytes(StandardCharsets.UTF_8);
        nameBytes = s.name.getBytes(StandardCharsets.UTF_8);
        topicBytes = s.topic.getBytes(StandardCharsets.UTF_8);
        raf = new RandomAccessFile(s.path, "r");
        ch = raf.getChannel();
        long size = raf.length();
        if (index) {  // start = entry 1's position, end = past the last used entry
            pos = s.start;
            stop = Math.min(s.end, size);
            entry = 1;
        } else {
            pos = 0;
            stop = size - size % UNIT;
        }
        done = pos >= stop;
    }

    /** Rows from the current file into the batch from row n; returns the new row count. */
    private int fill(int n) throws IOException {
        int want = (int) Math.min(cap - n, (stop - pos) / UNIT);
        buf.clear();
        buf.limit(want * UNIT);
        while (buf.hasRemaining()) {
            if (ch.read(buf, pos + buf.position()) < 0) {
                break;
            }
        }
        int got = buf.position() / UNIT;
        for (int k = 0; k < got; k++) {
            int at = k * UNIT;
            long fileOffset = pos + at;
            if (index) {
                indexRow(n++, at, fileOffset);
                entry++;
            } else {
                long off = buf.getLong(at);
                int size = buf.getInt(at + 8);
                long tags = buf.getLong(at + 12);
                if (off == 0 && size == 0 && tags == 0) {  // unwritten space: the queue ends
                    done = true;
                    return n;
                }
                putCommon(n, fileOffset);
                putString(cTopic, n, topicBytes);
                putInt(cQueueId, n, (int) cur.base2);
                putLong(cQueueOffset, n, (cur.base + fileOffset) / UNIT);
                putLong(cClOffset, n, off);
                putInt(cSize, n, size);
                putLong(cTags, n, tags);
                n++;
            }
        }
        pos += (long) got * UNIT;
        if (got < want || pos >= stop) {
            done = true;
        }
        return n;
    }

    private void indexRow(int row, int at, long fileOffset) {
        putCommon(row, fileOffset);
        putInt(cEntry, row, (int) entry);
        putInt(cKeyHash, row, buf.getInt(at));
        putLong(cClOffset, row, buf.getLong(at + 4));
        putInt(cTimeDiff, row, buf.getInt(at + 12));
        putInt(cPrev, row, buf.getInt(at + 16));
        putLong(cBegin, row, cur.base2);
    }

    private void putCommon(int row, long fileOffset) {
        putString(cStore, row, storeBytes);
        putString(cFile, row, nameBytes);
        putLong(cFileOffset, row, fileOffset);
    }

    private void putInt(int c, int row, int v) {
        if (c >= 0) {
            vectors[c].putInt(row, v);
        }
    }

    private void putLong(int c, int row, long v) {
        if (c >= 0) {
            vectors[c].putLong(row, v);
        }
    }

    private void putString(int c, int row, byte[] v) {
        if (c >= 0) {
            vectors[c].putByteArray(row, v, 0, v.length);
        }
    }
}
