// A read-only mapping of a file read as big-endian values by position, as MappedByteBuffer's
// absolute get methods read it, through Unsafe on the mapping's address: the scan's JVM
// compiles with C1 alone (mqtool.spark.session.job_conf), where each of the buffer's getters
// stays a chain of calls (its scope checks) and this is one bounds check and one load.
// Every read is checked against the mapping's length (IndexOutOfBoundsException, as the
// buffer's); the buffer is kept, so the mapping lives as long as this object.
package mqtool.spark;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;

import org.apache.spark.unsafe.Platform;

final class Mapped {
    private static final boolean LITTLE = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN;

    private final MappedByteBuffer buffer;
    private final long address;
    private final int length;

    /** The first ``size`` bytes of ``ch`` (at most Integer.MAX_VALUE), mapped read-only. */
    Mapped(FileChannel ch, long size) throws IOException {
        buffer = ch.map(FileChannel.MapMode.READ_ONLY, 0, size);
        buffer.order(ByteOrder.BIG_ENDIAN);
        address = Platform.getDirectBufferAddress(buffer);
        length = buffer.limit();
    }

    /** The mapping's length in bytes. */
    int limit() {
        return length;
    }

    /** A view of the whole mapping (for reads that take a ByteBuffer: the CRC). */
    ByteBuffer duplicate() {
        return buffer.duplicate();
    }

    // Each getter is kept under C1's inlining limit (35 bytes of bytecode): the failure and
    // the byte order are calls of their own.
    private void outside(int at) {
        throw new IndexOutOfBoundsException("read at " + at + " in a mapping of " + length);
    }

    private static short order(short v) {
        return LITTLE ? Short.reverseBytes(v) : v;
    }

    private static int order(int v) {
        return LITTLE ? Integer.reverseBytes(v) : v;
    }

    private static long order(long v) {
        return LITTLE ? Long.reverseBytes(v) : v;
    }

    byte get(int at) {
        if ((at | (length - 1 - at)) < 0) {
            outside(at);
        }
        return Platform.getByte(null, address + at);
    }

    short getShort(int at) {
        if ((at | (length - 2 - at)) < 0) {
            outside(at);
        }
        return order(Platform.getShort(null, address + at));
    }

    int getInt(int at) {
        if ((at | (length - 4 - at)) < 0) {
            outside(at);
        }
        return order(Platform.getInt(null, address + at));
    }

    long getLong(int at) {
        if ((at | (length - 8 - at)) < 0) {
            outside(at);
        }
        return order(Platform.getLong(null, address + at));
    }

    /** The big-endian int at ``i`` of ``a`` (in bounds: the caller's check), one load. */
    static int intAt(byte[] a, int i) {
        return order(Platform.getInt(a, Platform.BYTE_ARRAY_OFFSET + i));
    }

    /** The big-endian long at ``i`` of ``a`` (in bounds: the caller's check), one load. */
    static long longAt(byte[] a, int i) {
        return order(Platform.getLong(a, Platform.BYTE_ARRAY_OFFSET + i));
    }

    /** ``len`` bytes from ``at`` into ``dst`` from ``dstAt`` (short runs: a record's topic and
     * properties). */
    void get(int at, byte[] dst, int dstAt, int len) {
        if ((at | len | (length - len - at)) < 0) {
            outside(at);
        }
        if ((dstAt | (dst.length - len - dstAt)) < 0) {
            throw new IndexOutOfBoundsException("copy of " + len + " bytes to " + dstAt);
        }
        // eight bytes at a time: C1 compiles Unsafe's copyMemory as a call into the VM
        long from = address + at;
        long to = Platform.BYTE_ARRAY_OFFSET + dstAt;
        int k = 0;
        for (; k + 8 <= len; k += 8) {
            Platform.putLong(dst, to + k, Platform.getLong(null, from + k));
        }
        for (; k < len; k++) {
            Platform.putByte(dst, to + k, Platform.getByte(null, from + k));
        }
    }
}
