// The batch loop both readers of mqtool's Spark-native source share (CommitlogDecoder for the
// commitlog, AuxDecoder for consume-queue units and index entries): splits one after the
// other, each file opened here; rows into one reused ColumnarBatch. Fixed-width columns are
// Spark's OnHeapColumnVectors; string and map columns are the reader's own (StringColumn,
// MapColumn): a row refers to bytes the reader holds (constants, or the batch's byte arena,
// into which a record's variable-length bytes are copied once), so no string is copied per
// column.
package mqtool.spark;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.util.List;

import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

abstract class SplitReader implements PartitionReader<ColumnarBatch> {
    protected final List<CommitlogSource.SplitSpec> splits;
    protected final ColumnVector[] columns;
    protected final WritableColumnVector[] fixed;  // [c]: the fixed-width column c, else null
    protected final StringColumn[] strings;        // [c]: the string column c, else null
    protected final MapColumn[] maps;              // [c]: the map column c, else null
    protected final ColumnarBatch batch;
    protected final int cap;
    protected int next = 0;        // the next split to open
    protected boolean done = true; // the current split is read (or none is open)

    // the split being read
    protected CommitlogSource.SplitSpec cur;
    protected RandomAccessFile raf;
    protected byte[] storeBytes;
    protected byte[] nameBytes;

    // the batch's byte arena: variable-length bytes the string columns refer to
    protected byte[] arena = new byte[1 << 20];
    protected int used = 0;

    SplitReader(List<CommitlogSource.SplitSpec> splits, StructType schema, int batchRows) {
        this.splits = splits;
        this.cap = batchRows;
        StructField[] fields = schema.fields();
        columns = new ColumnVector[fields.length];
        fixed = new WritableColumnVector[fields.length];
        strings = new StringColumn[fields.length];
        maps = new MapColumn[fields.length];
        for (int i = 0; i < fields.length; i++) {
            DataType t = fields[i].dataType();
            if (t instanceof StringType) {
                columns[i] = strings[i] = new StringColumn(t, cap);
            } else if (t instanceof MapType) {
                columns[i] = maps[i] = new MapColumn((MapType) t, cap);
            } else {
                columns[i] = fixed[i] = new OnHeapColumnVector(cap, t);
            }
        }
        this.batch = new ColumnarBatch(columns);
    }

    /** Start reading the split cur (raf open, size bytes long); sets done when it holds
     * nothing. */
    protected abstract void openSplit(long size) throws IOException;

    /** Rows from the current split into the batch from row n; returns the new row count
     * (sets done at the split's end). */
    protected abstract int fill(int n) throws IOException;

    /** The index of column name in the read schema, -1 when it is not read. */
    static int idx(StructType s, String name) {
        String[] names = s.fieldNames();
        for (int i = 0; i < names.length; i++) {
            if (names[i].equals(name)) {
                return i;
            }
        }
        return -1;
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private void open(CommitlogSource.SplitSpec s) throws IOException {
        cur = s;
        storeBytes = bytes(s.store);
        nameBytes = bytes(s.name);
        done = false;
        raf = new RandomAccessFile(s.path, "r");
        openSplit(raf.length());
    }

    private void closeFile() throws IOException {
        if (raf != null) {
            raf.close();
            raf = null;
        }
    }

    @Override
    public boolean next() throws IOException {
        for (int c = 0; c < columns.length; c++) {
            if (fixed[c] != null) {
                fixed[c].reset();
            } else {
                ((ReaderColumn) columns[c]).reset();
            }
        }
        used = 0;
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

    /** Room for len more bytes in the arena from used (a new arena when it is full: the rows
     * written so far keep the old one). */
    protected void arenaRoom(int len) {
        if (used + len > arena.length) {
            arena = new byte[Math.max(2 * arena.length, len)];
            used = 0;
        }
    }

    protected void putInt(int c, int row, int v) {
        if (c >= 0) {
            fixed[c].putInt(row, v);
        }
    }

    protected void putLong(int c, int row, long v) {
        if (c >= 0) {
            fixed[c].putLong(row, v);
        }
    }

    /** A string column's row: v itself (a constant the reader keeps), no copy. */
    protected void putString(int c, int row, byte[] v) {
        if (c >= 0) {
            strings[c].put(row, v);
        }
    }

    /** A string column's row: len bytes of a from start (the arena), no copy. */
    protected void putSpan(int c, int row, byte[] a, int start, int len) {
        if (c >= 0) {
            strings[c].put(row, a, start, len);
        }
    }

    protected void putNull(int c, int row) {
        if (c < 0) {
            return;
        }
        if (fixed[c] != null) {
            fixed[c].putNull(row);
        } else if (strings[c] != null) {
            strings[c].putNull(row);
        } else {
            maps[c].putNull(row);
        }
    }
}
