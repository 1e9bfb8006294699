/* mqtool judge (RocketMQ 5.3.3 build): replaces RocketMQ's JNA binding to libc. madvise is a hint
 * (a no-op here changes no byte), mincore reports every page resident, getpagesize is 4096;
 * mlock, munlock, memset, mlockall and msync fail loudly (the judge's configuration never uses them). */
package org.apache.rocketmq.store.util;

import com.sun.jna.NativeLong;
import com.sun.jna.Pointer;
import java.util.Arrays;

public interface LibC {
    LibC INSTANCE = new LibC() {
    };

    int MADV_NORMAL = 0;
    int MADV_RANDOM = 1;
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
        return 0;
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

    default int mincore(Pointer p, NativeLong length, byte[] vec) {
        Arrays.fill(vec, (byte) 1);
        return 0;
    }

    default int getpagesize() {
        return 4096;
    }
}
