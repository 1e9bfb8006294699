/* mqtool judge: compile-time stand-in for JNA's NativeLong (see Pointer). */
package com.sun.jna;

public class NativeLong {
    public NativeLong(long value) {
    }
}
