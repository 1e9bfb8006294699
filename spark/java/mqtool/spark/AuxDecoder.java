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
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.util.List;

import org.apache.spark.sql.types.StructType;

class AuxDecoder extends SplitReader {
    static final int UNIT = 20;

    private final boolean index;
    private final int cStore, cFile, cFileOffset, cTopic, cQueueId, cQueueOffset, cClOffset;
    private final int cSize, cTags, cEntry, cKeyHash, cTimeDiff, cPrev, cBegin;

    byte[] topicBytes;
    private final ByteBuffer buf;
    private FileChannel ch;
    private long pos;      // file position of the next unit
    private long stop;     // file position where this split's units end
    long entry;    // index: the number of the entry being read (then the next)

    AuxDecoder(List<CommitlogSource.SplitSpec> splits, StructType schema, String table,
               int batchRows) {
        super(splits, schema, batchRows);
        this.index = "index".equals(table);
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

    @Override
    protected void openSplit(long size) {
        topicBytes = bytes(cur.topic);
        ch = raf.getChannel();
        if (index) {  // start = entry 1's position, end = past the last used entry
            pos = cur.start;
            stop = Math.min(cur.end, size);
            entry = 1;
        } else {
            pos = 0;
            stop = size - size % UNIT;
        }
        done = pos >= stop;
    }

    /** Rows from the current file into the batch from row n; returns the new row count. */
    @Override
    protected int fill(int n) throws IOException {
        int want = (int) Math.min(cap - n, (stop - pos) / UNIT);
        buf.clear();
        buf.limit(want * UNIT);
        while (buf.hasRemaining()) {
            if (ch.read(buf, pos + buf.position()) < 0) {
                break;
            }
        }
        int got = buf.position() / UNIT;
        byte[] a = buf.array();  // read by Mapped's one-load getters (got units: in bounds)
        for (int k = 0; k < got; k++) {
            int at = k * UNIT;
            long fileOffset = pos + at;
            if (index) {
                entry(n++, fileOffset, Mapped.intAt(a, at), Mapped.longAt(a, at + 4),
                    Mapped.intAt(a, at + 12), Mapped.intAt(a, at + 16));
                entry++;
            } else {
                long off = Mapped.longAt(a, at);
                int size = Mapped.intAt(a, at + 8);
                long tags = Mapped.longAt(a, at + 12);
                if (off == 0 && size == 0 && tags == 0) {  // unwritten space: the queue ends
                    done = true;
                    return n;
                }
                unit(n++, fileOffset, (cur.base + fileOffset) / UNIT, off, size, tags);
            }
        }
        pos += (long) got * UNIT;
        if (got < want || pos >= stop) {
            done = true;
        }
        return n;
    }

    /** Row ``row``: the consume-queue unit at fileOffset (queue offset qo) of the split's
     * queue (cur.topic, queueId cur.base2). */
    void unit(int row, long fileOffset, long qo, long off, int size, long tags) {
        putCommon(row, fileOffset);
        putString(cTopic, row, topicBytes);
        putInt(cQueueId, row, (int) cur.base2);
        putLong(cQueueOffset, row, qo);
        putLong(cClOffset, row, off);
        putInt(cSize, row, size);
        putLong(cTags, row, tags);
    }

    /** Row ``row``: index entry number ``entry`` at fileOffset. */
    void entry(int row, long fileOffset, int keyHash, long phyOffset, int timeDiff, int prev) {
        putCommon(row, fileOffset);
        putInt(cEntry, row, (int) entry);
        putInt(cKeyHash, row, keyHash);
        putLong(cClOffset, row, phyOffset);
        putInt(cTimeDiff, row, timeDiff);
        putInt(cPrev, row, prev);
        putLong(cBegin, row, cur.base2);
    }

    private void putCommon(int row, long fileOffset) {
        putString(cStore, row, storeBytes);
        putString(cFile, row, nameBytes);
        putLong(cFileOffset, row, fileOffset);
    }
}
