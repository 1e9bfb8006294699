// The record hot loop in plain Java, as a measured alternative to the numba kernel
// (mqtool.formats.commitlog_fields): TOTALSIZE walk, the same record checks, field gather into column
// arrays, property split into key/value spans, optionally BODYCRC (java.util.zip.CRC32, the
// JDK's intrinsic). Written for bench/scan only (compiled with javac by bench_scan.py when a
// JDK is there); mqtool itself does not use it. Layout facts: formats/commitlog.py.
//
// usage: java -cp DIR HotLoop [--crc] FILE...   prints: records seconds pairs
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.util.zip.CRC32;

public final class HotLoop {
    static final int MAGIC_V1 = 0xDAA320A7;
    static final int MAGIC_V2 = 0xDAA320AB;
    static final int CAP = 8192;

    // column arrays, reused per batch (as the kernel's field table)
    static final long[] pos = new long[CAP], queueOffset = new long[CAP], phys = new long[CAP];
    static final long[] bornTs = new long[CAP], storeTs = new long[CAP], prepared = new long[CAP];
    static final int[] size = new int[CAP], bodyCrc = new int[CAP], queueId = new int[CAP];
    static final int[] flag = new int[CAP], sysFlag = new int[CAP], bornPort = new int[CAP];
    static final int[] storePort = new int[CAP], reconsume = new int[CAP], bodyPos = new int[CAP];
    static final int[] bodyLen = new int[CAP], topicPos = new int[CAP], topicLen = new int[CAP];
    static final int[] propsPos = new int[CAP], propsLen = new int[CAP], bornIp = new int[CAP];
    static final int[] storeIp = new int[CAP];
    static final byte[] crcOk = new byte[CAP];
    static int[] pairs = new int[CAP * 32];
    static long totalPairs = 0;

    public static void main(String[] args) throws Exception {
        boolean crc = false;
        long records = 0;
        long t0 = System.nanoTime();
        for (String a : args) {
            if (a.equals("--crc")) { crc = true; continue; }
            long base = Long.parseLong(a.substring(a.lastIndexOf('/') + 1));
            try (RandomAccessFile f = new RandomAccessFile(a, "r"); FileChannel ch = f.getChannel()) {
                MappedByteBuffer b = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size());
                b.order(ByteOrder.BIG_ENDIAN);
                int p = 0;
                while (true) {
                    int[] res = scan(b, p, base, crc);
                    records += res[0];
                    split(b, res[0]);
                    p = res[1];
                    if (res[2] != 1) break;
                }
            }
        }
        double secs = (System.nanoTime() - t0) / 1e9;
        System.out.println(records + " " + secs + " " + totalPairs);
    }

    static boolean ascii(ByteBuffer b, int s, int n) {
        for (int i = s; i < s + n; i++) if (b.get(i) < 0) return false;
        return true;
    }

    // returns {count, position, status}: status 1 = batch full, 0 = stopped
    static int[] scan(ByteBuffer b, int p, long base, boolean crc) {
        int n = b.limit();
        int i = 0;
        CRC32 c = new CRC32();
        while (i < CAP) {
            if (p + 8 > n) return new int[] {i, p, 0};
            int sz = b.getInt(p);
            int magic = b.getInt(p + 4);
            int tlw = magic == MAGIC_V1 ? 1 : magic == MAGIC_V2 ? 2 : 0;
            if (tlw == 0 || sz < 90 + tlw || (long) p + sz > n) return new int[] {i, p, 0};
            int end = p + sz;
            int sf = b.getInt(p + 36);
            int bl = (sf & 0x10) != 0 ? 16 : 4, sl = (sf & 0x20) != 0 ? 16 : 4;
            int bornPos = p + 48, stsPos = bornPos + bl + 4, sPos = stsPos + 8;
            int recPos = sPos + sl + 4, blenPos = recPos + 12;
            if (blenPos + 4 > end) return new int[] {i, p, 0};
            int blen = b.getInt(blenPos), bp = blenPos + 4;
            if (blen < 0 || bp + blen > end) return new int[] {i, p, 0};
            int tl = bp + blen;
            if (tl + tlw > end) return new int[] {i, p, 0};
            int tlen = tlw == 2 ? b.getShort(tl) : b.get(tl);
            int tp = tl + tlw;
            if (tlen < 0 || tp + tlen > end || tp + tlen + 2 > end) return new int[] {i, p, 0};
            int plen = b.getShort(tp + tlen), pp = tp + tlen + 2;
            if (plen < 0 || pp + plen != end) return new int[] {i, p, 0};
            long ph = b.getLong(p + 28);
            if (ph != base + p) return new int[] {i, p, 0};
            if (!ascii(b, tp, tlen) || !ascii(b, pp, plen)) return new int[] {i, p, 0};
            pos[i] = p; size[i] = sz; bodyCrc[i] = b.getInt(p + 8); queueId[i] = b.getInt(p + 12);
            flag[i] = b.getInt(p + 16); queueOffset[i] = b.getLong(p + 20); phys[i] = ph;
            sysFlag[i] = sf; bornTs[i] = b.getLong(p + 40); bornIp[i] = b.getInt(bornPos);
            bornPort[i] = b.getInt(bornPos + bl); storeTs[i] = b.getLong(stsPos);
            storeIp[i] = b.getInt(sPos); storePort[i] = b.getInt(sPos + sl);
            reconsume[i] = b.getInt(recPos); prepared[i] = b.getLong(recPos + 4);
            bodyPos[i] = bp; bodyLen[i] = blen; topicPos[i] = tp; topicLen[i] = tlen;
            propsPos[i] = pp; propsLen[i] = plen;
            if (crc) {
                c.reset();
                c.update(b.slice(bp, blen));
                crcOk[i] = (byte) (((int) c.getValue() & 0x7FFFFFFF) == bodyCrc[i] ? 1 : 0);
            }
            i++;
            p = end;
        }
        return new int[] {i, p, 1};
    }

    // string2messageProperties as spans: key start/len, value start/len per pair
    static void split(ByteBuffer b, int count) {
        int m = 0;
        for (int i = 0; i < count; i++) {
            int seg = propsPos[i], e = seg + propsLen[i], kv = -1;
            for (int p = seg; p <= e; p++) {
                int ch = p < e ? b.get(p) : 2;
                if (ch == 1) { if (kv < 0) kv = p; }
                else if (ch == 2) {
                    if (kv > seg && kv < p - 1) {
                        if (m + 4 > pairs.length) pairs = java.util.Arrays.copyOf(pairs, pairs.length * 2);
                        pairs[m++] = seg; pairs[m++] = kv - seg; pairs[m++] = kv + 1; pairs[m++] = p - kv - 1;
                    }
                    seg = p + 1; kv = -1;
                }
            }
        }
        totalPairs += m / 4;
    }
}
