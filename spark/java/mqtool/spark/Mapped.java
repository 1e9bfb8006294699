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

    private static void outside(int at, int width, int length) {
        throw new IndexOutOfBoundsException(
            "read of " + width + " bytes at " + at + " in a mapping of " + length);
    }

    byte get(int at) {
        if ((at | (length - 1 - at)) < 0) {
            outside(at, 1, length);
        }
        return Platform.getByte(null, address + at);
    }

    short getShort(int at) {
        if ((at | (length - 2 - at)) < 0) {
            outside(at, 2, length);
        }
        short v = Platform.getShort(null, address + at);
        return LITTLE ? Short.reverseBytes(v) : v;
    }

    int getInt(int at) {
        if ((at | (length - 4 - at)) < 0) {
            outside(at, 4, length);
        }
        int v = Platform.getInt(null, address + at);
        return LITTLE ? Integer.reverseBytes(v) : v;
    }

    long getLong(int at) {
        if ((at | (length - 8 - at)) < 0) {
            outside(at, 8, length);
        }
        long v = Platform.getLong(null, address + at);
        return LITTLE ? Long.reverseBytes(v) : v;
    }

    /** ``len`` bytes from ``at`` into ``dst`` from ``dstAt``. */
    void get(int at, byte[] dst, int dstAt, int len) {
        if ((at | len | (length - len - at)) < 0) {
            outside(at, len, length);
        }
        if ((dstAt | (dst.length - len - dstAt)) < 0) {
            throw new IndexOutOfBoundsException("copy of " + len + " bytes to " + dstAt);
        }
        Platform.copyMemory(null, address + at, dst, Platform.BYTE_ARRAY_OFFSET + dstAt, len);
    }
}
