// The properties column (map<string, string>) of mqtool's Spark-native reader: per row the
// first pair and the pair count; keys and values are StringColumns referring to the batch's
// byte arena (see StringColumn). Valid until the reader's next batch.
package mqtool.spark;

import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarMap;

final class MapColumn extends ReaderColumn {
    final StringColumn keys;
    final StringColumn values;
    private int[] first;
    private int[] count;
    private boolean[] isNull;
    private int pairs;  // pairs written in this batch

    MapColumn(MapType type, int capacity) {
        super(type);
        keys = new StringColumn(type.keyType(), 8 * capacity);
        values = new StringColumn(type.valueType(), 8 * capacity);
        first = new int[capacity];
        count = new int[capacity];
        isNull = new boolean[capacity];
    }

    @Override
    void reset() {
        super.reset();
        pairs = 0;
        keys.reset();
        values.reset();
    }

    /** The index of the row's first pair, with room for m pairs from there. */
    int begin(int m) {
        keys.reserve(pairs + m);
        values.reserve(pairs + m);
        return pairs;
    }

    /** The row holds the m pairs written from begin()'s index. */
    void put(int row, int m) {
        first[row] = pairs;
        count[row] = m;
        isNull[row] = false;
        pairs += m;
    }

    void putNull(int row) {
        isNull[row] = true;
        nulls++;
    }

    @Override
    public boolean isNullAt(int row) {
        return isNull[row];
    }

    @Override
    public ColumnarMap getMap(int row) {
        return isNull[row] ? null : new ColumnarMap(keys, values, first[row], count[row]);
    }

    @Override
    public ColumnVector getChild(int ordinal) {
        return ordinal == 0 ? keys : values;
    }
}
