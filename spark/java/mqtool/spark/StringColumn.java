// A string column of mqtool's Spark-native reader: each row is a reference to bytes the reader
// already holds (a constant such as the store's name, or a span of the batch's byte arena where
// the record's topic and properties were copied once), so writing a row costs three array
// stores and no byte copy. Spark reads it through getUTF8String, which wraps the bytes
// (UTF8String.fromBytes) as OnHeapColumnVector does. Valid until the reader's next batch.
package mqtool.spark;

import java.util.Arrays;

import org.apache.spark.sql.types.DataType;
import org.apache.spark.unsafe.types.UTF8String;

final class StringColumn extends ReaderColumn {
    private byte[][] base;  // null: the row is null
    private int[] start;
    private int[] len;

    StringColumn(DataType type, int capacity) {
        super(type);
        base = new byte[capacity][];
        start = new int[capacity];
        len = new int[capacity];
    }

    /** Room for rows 0 .. rows-1. */
    void reserve(int rows) {
        if (rows > base.length) {
            int c = Math.max(rows, 2 * base.length);
            base = Arrays.copyOf(base, c);
            start = Arrays.copyOf(start, c);
            len = Arrays.copyOf(len, c);
        }
    }

    void put(int row, byte[] bytes, int from, int length) {
        base[row] = bytes;
        start[row] = from;
        len[row] = length;
    }

    void put(int row, byte[] bytes) {
        put(row, bytes, 0, bytes.length);
    }

    void putNull(int row) {
        base[row] = null;
        nulls++;
    }

    @Override
    public boolean isNullAt(int row) {
        return base[row] == null;
    }

    @Override
    public UTF8String getUTF8String(int row) {
        byte[] b = base[row];
        return b == null ? null : UTF8String.fromBytes(b, start[row], len[row]);
    }

    @Override
    public byte[] getBinary(int row) {
        byte[] b = base[row];
        return b == null ? null : Arrays.copyOfRange(b, start[row], start[row] + len[row]);
    }
}
