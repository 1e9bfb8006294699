/* mqtool judge: replaces RocketMQ's JNA binding to libc. Every call fails loudly: the judge's
 * configuration never mlocks, munlocks or madvises (no warm-up, no transient store pool). */
package org.apache.rocketmq.store.util;

import com.sun.jna.NativeLong;
import com.sun.jna.Pointer;

public interface LibC {
    LibC INSTANCE = new LibC() {
    };

    int MADV_WILLNEED = 3;
    int MADV_DONTNEED = 4;
    int MCL_CURRENT = 1;
    int MCL_FUTURE = 2;
    int MCL_ONFAULT = 4;
    int MS_ASYNC = 0x0001;
    int MS_INVALIDATE = 0x0002;
    int MS_SYNC = 0x0004;

    default int mlock(Pointer var1, NativeLong var2) {
        throw new UnsupportedOperationException("judge build: no JNA (mlock)");
    }

    default int munlock(Pointer var1, NativeLong var2) {
        throw new UnsupportedOperationException("judge build: no JNA (munlock)");
    }

    default int madvise(Pointer var1, NativeLong var2, int var3) {
        throw new UnsupportedOperationException("judge build: no JNA (madvise)");
    }

    default Pointer memset(Pointer p, int v, long len) {
        throw new UnsupportedOperationException("judge build: no JNA (memset)");
    }

    default int mlockall(int flags) {
        throw new UnsupportedOperationException("judge build: no JNA (mlockall)");
    }

    default int msync(Pointer p, NativeLong length, int flags) {
        throw new UnsupportedOperationException("judge build: no JNA (msync)");
    }
}
