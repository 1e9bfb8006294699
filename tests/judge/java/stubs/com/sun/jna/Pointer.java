/* mqtool judge: compile-time stand-in for JNA's Pointer. The judge never mlocks or warms files
 * (warmMapedFileEnable and transientStorePoolEnable stay false), so nothing native is called. */
package com.sun.jna;

public class Pointer {
    public Pointer(long peer) {
    }
}
