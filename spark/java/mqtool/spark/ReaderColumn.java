// The base of the reader's own column vectors (StringColumn, MapColumn): Spark reads a column
// through the getter of its type only; every other getter says what the column is.
package mqtool.spark;

import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

abstract class ReaderColumn extends ColumnVector {
    protected int nulls;  // null rows in this batch

    ReaderColumn(DataType type) {
        super(type);
    }

    /** A new batch: every row is written again before it is read. */
    void reset() {
        nulls = 0;
    }

    @Override
    public boolean hasNull() {
        return nulls > 0;
    }

    @Override
    public int numNulls() {
        return nulls;
    }

    @Override
    public void close() {
    }

    private UnsupportedOperationException wrongType(String getter) {
        return new UnsupportedOperationException(getter + " of a " + type.simpleString() + " column");
    }

    @Override
    public boolean getBoolean(int row) {
        throw wrongType("getBoolean");
    }

    @Override
    public byte getByte(int row) {
        throw wrongType("getByte");
    }

    @Override
    public short getShort(int row) {
        throw wrongType("getShort");
    }

    @Override
    public int getInt(int row) {
        throw wrongType("getInt");
    }

    @Override
    public long getLong(int row) {
        throw wrongType("getLong");
    }

    @Override
    public float getFloat(int row) {
        throw wrongType("getFloat");
    }

    @Override
    public double getDouble(int row) {
        throw wrongType("getDouble");
    }

    @Override
    public ColumnarArray getArray(int row) {
        throw wrongType("getArray");
    }

    @Override
    public ColumnarMap getMap(int row) {
        throw wrongType("getMap");
    }

    @Override
    public Decimal getDecimal(int row, int precision, int scale) {
        throw wrongType("getDecimal");
    }

    @Override
    public UTF8String getUTF8String(int row) {
        throw wrongType("getUTF8String");
    }

    @Override
    public byte[] getBinary(int row) {
        throw wrongType("getBinary");
    }

    @Override
    public ColumnVector getChild(int ordinal) {
        throw wrongType("getChild");
    }
}
