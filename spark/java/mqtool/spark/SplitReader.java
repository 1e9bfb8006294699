// The batch loop both readers of mqtool's Spark-native source share (CommitlogDecoder for the
// commitlog, AuxDecoder for consume-queue units and index entries): splits one after the
// other, rows into one reused ColumnarBatch of on-heap column vectors.
package mqtool.spark;

import java.io.IOException;
import java.util.List;

import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

abstract class SplitReader implements PartitionReader<ColumnarBatch> {
    protected final List<CommitlogSource.SplitSpec> splits;
    protected final WritableColumnVector[] vectors;
    protected final ColumnarBatch batch;
    protected final int cap;
    protected int next = 0;        // the next split to open
    protected boolean done = true; // the current split is read (or none is open)

    SplitReader(List<CommitlogSource.SplitSpec> splits, StructType schema, int batchRows) {
        this.splits = splits;
        this.cap = batchRows;
        this.vectors = OnHeapColumnVector.allocateColumns(cap, schema);
        this.batch = new ColumnarBatch(vectors);
    }

    /** Start reading split s (sets done when it holds nothing). */
    protected abstract void open(CommitlogSource.SplitSpec s) throws IOException;

    /** Rows from the current split into the batch from row n; returns the new row count
     * (sets done at the split's end). */
    protected abstract int fill(int n) throws IOException;

    protected abstract void closeFile() throws IOException;

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

    protected void putInt(int c, int row, int v) {
        if (c >= 0) {
            vectors[c].putInt(row, v);
        }
    }

    protected void putLong(int c, int row, long v) {
        if (c >= 0) {
            vectors[c].putLong(row, v);
        }
    }

    protected void putString(int c, int row, byte[] v) {
        if (c >= 0) {
            vectors[c].putByteArray(row, v, 0, v.length);
        }
    }
}
