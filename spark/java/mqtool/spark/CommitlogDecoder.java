// The record loop of mqtool's Spark-native commitlog reader (see CommitlogSource.java).
//
// Accepts a record at p only when every check of mqtool.formats.commitlog_fields.scan holds (magic V1/V2,
// TOTALSIZE at least 91 (+1 for V2) and inside the file, every length adding up to TOTALSIZE as
// MessageExtEncoder#calMsgLength, PHYSICALOFFSET = the record's commitlog position, properties
// not ending in a zero byte (torn), topic and properties well-formed UTF-8). Columns are those
// of mqtool.spark.arrowcols.message_columns, value for value (tests/spark/test_spark_java.py
// compares the two on every fixture and on damaged stores). Anything else than an accepted
// record, the file's BLANK or zeros to the end of the file's data becomes a "deferred" row for
// the Python decoder: the damage rule stays in formats/walker.py.
//
// Per record the text is the cost: topic
// and properties are checked as UTF-8 in one pass, the property separators are found eight
// bytes at a time, and TAGS / KEYS / UNIQ_KEY are compared as one int or long
// (tests/spark/test_spark_java.py::test_java_equals_python_on_any_text).
package mqtool.spark;

import static mqtool.spark.RecordLayout.BODYCRC_AT;
import static mqtool.spark.RecordLayout.BODYLEN_WIDTH;
import static mqtool.spark.RecordLayout.BORNHOST_AT;
import static mqtool.spark.RecordLayout.BORNTIMESTAMP_AT;
import static mqtool.spark.RecordLayout.END_FILE_MIN_BLANK_LENGTH;
import static mqtool.spark.RecordLayout.FLAG_AT;
import static mqtool.spark.RecordLayout.IPV4_WIDTH;
import static mqtool.spark.RecordLayout.IPV6_WIDTH;
import static mqtool.spark.RecordLayout.MAGIC_AT;
import static mqtool.spark.RecordLayout.PHYSICALOFFSET_AT;
import static mqtool.spark.RecordLayout.PORT_WIDTH;
import static mqtool.spark.RecordLayout.PREPAREDTRANSACTIONOFFSET_WIDTH;
import static mqtool.spark.RecordLayout.PROPERTIESLEN_WIDTH;
import static mqtool.spark.RecordLayout.QUEUEID_AT;
import static mqtool.spark.RecordLayout.QUEUEOFFSET_AT;
import static mqtool.spark.RecordLayout.RECONSUMETIMES_WIDTH;
import static mqtool.spark.RecordLayout.STORETIMESTAMP_WIDTH;
import static mqtool.spark.RecordLayout.SYSFLAG_AT;
import static mqtool.spark.RecordLayout.TOPICLEN_V1_WIDTH;
import static mqtool.spark.RecordLayout.TOPICLEN_V2_WIDTH;
import static mqtool.spark.RecordLayout.TOTALSIZE_AT;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import java.util.zip.CRC32;

import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.Platform;

class CommitlogDecoder extends SplitReader {
    static final int MAGIC_V1 = RecordLayout.MESSAGE_MAGIC_CODE;
    static final int MAGIC_V2 = RecordLayout.MESSAGE_MAGIC_CODE_V2;
    static final int MAGIC_BLANK = RecordLayout.BLANK_MAGIC_CODE;
    static final int MIN_V1 = RecordLayout.MIN_RECORD_SIZE;
    static final int BORN_V6 = RecordLayout.BORNHOST_V6_FLAG;
    static final int STORE_V6 = RecordLayout.STOREHOSTADDRESS_V6_FLAG;
    static final int COMPRESSED = 0x1;
    static final byte[][] COMPRESSION = {bytes("ZLIB"), bytes("LZ4"), bytes("ZSTD"), bytes("ZLIB"),
        bytes("ZLIB"), bytes("ZLIB"), bytes("ZLIB"), bytes("ZLIB")};
    static final int MSG_ID_MAX = 2 * 16 + 8 + 16;  // hex of a v6 address, port, offset
    static final byte[] HEX = bytes("0123456789ABCDEF");
    static final byte[] HEX_HI = new byte[256];  // a byte's two upper-case hex digits
    static final byte[] HEX_LO = new byte[256];

    static {
        for (int v = 0; v < 256; v++) {
            HEX_HI[v] = HEX[v >> 4];
            HEX_LO[v] = HEX[v & 15];
        }
    }
    static final byte[][] PICK = {bytes("TAGS"), bytes("KEYS"), bytes("UNIQ_KEY")};
    // the picked keys as words in the machine's order (pick() compares a key of their length so)
    static final int PICK_TAGS = Platform.getInt(PICK[0], Platform.BYTE_ARRAY_OFFSET);
    static final int PICK_KEYS = Platform.getInt(PICK[1], Platform.BYTE_ARRAY_OFFSET);
    static final long PICK_UNIQ = Platform.getLong(PICK[2], Platform.BYTE_ARRAY_OFFSET);

    final CommitlogSource.Options opt;
    // column indexes in the read schema (-1: not read)
    private final int cType, cDetail, cStore, cFile, cFileOffset, cClOffset, cSize, cMagic, cTopic;
    private final int cQueueId, cQueueOffset, cFlag, cSysFlag, cBodyCrc, cBornTs, cBornHost;
    private final int cStoreTs, cStoreHost, cReconsume, cPrepared, cBodyLen, cPropsRaw, cProps;
    private final int cTags, cKeys, cUniq, cMsgId, cCrcOk, cCompression;
    private final boolean wantSplit;
    private final boolean propsOnlyFor;

    // the split being read (SplitReader opens its file)
    Mapped b;
    private long p;

    int[] pairs = new int[64 * 4];
    final int[] picked = new int[3];  // pick(): TAGS, KEYS, UNIQ_KEY
    private final int[] pickedCols;
    private final byte[][] propsFor;  // opt.propertiesFor as bytes
    private final CRC32 crc = new CRC32();
    private ByteBuffer bodies;  // b's view for the CRC (its position and limit move)
    private long hostKeyB = Long.MIN_VALUE, hostKeyS = Long.MIN_VALUE;
    private byte[] hostB, hostS;

    CommitlogDecoder(List<CommitlogSource.SplitSpec> splits, StructType schema,
                     CommitlogSource.Options opt) {
        super(splits, schema, opt.batchRows);
        this.opt = opt;
        cType = idx(schema, "recordType");
        cDetail = idx(schema, "detail");
        cStore = idx(schema, "store");
        cFile = idx(schema, "file");
        cFileOffset = idx(schema, "fileOffset");
        cClOffset = idx(schema, "commitLogOffset");
        cSize = idx(schema, "storeSize");
        cMagic = idx(schema, "magic");
        cTopic = idx(schema, "topic");
        cQueueId = idx(schema, "queueId");
        cQueueOffset = idx(schema, "queueOffset");
        cFlag = idx(schema, "flag");
        cSysFlag = idx(schema, "sysFlag");
        cBodyCrc = idx(schema, "bodyCRC");
        cBornTs = idx(schema, "bornTimestamp");
        cBornHost = idx(schema, "bornHost");
        cStoreTs = idx(schema, "storeTimestamp");
        cStoreHost = idx(schema, "storeHost");
        cReconsume = idx(schema, "reconsumeTimes");
        cPrepared = idx(schema, "preparedTransactionOffset");
        cBodyLen = idx(schema, "bodyLength");
        cPropsRaw = idx(schema, "propertiesRaw");
        cProps = idx(schema, "properties");
        cTags = idx(schema, "tags");
        cKeys = idx(schema, "keys");
        cUniq = idx(schema, "uniqKey");
        cMsgId = idx(schema, "offsetMsgId");
        cCrcOk = idx(schema, "crcOk");
        cCompression = idx(schema, "compressionType");
        wantSplit = cProps >= 0 || cTags >= 0 || cKeys >= 0 || cUniq >= 0;
        propsOnlyFor = opt.propertiesFor.length > 0 && cTags < 0 && cKeys < 0 && cUniq < 0;
        pickedCols = new int[] {cTags, cKeys, cUniq};
        propsFor = new byte[opt.propertiesFor.length][];
        for (int i = 0; i < propsFor.length; i++) {
            propsFor[i] = bytes(opt.propertiesFor[i]);
        }
    }

    // --- the split loop ----------------------------------------------------------------------
    @Override
    protected void openSplit(long size) throws IOException {
        CommitlogSource.SplitSpec s = cur;
        b = null;
        if (size == 0 || s.start >= size || s.start >= s.dataEnd) {
            done = true;  // nothing starts here (the decoder in Python says the same)
            return;
        }
        if (size > Integer.MAX_VALUE - 16) {
            pendingDeferred(s.start, "resync");
            return;
        }
        b = new Mapped(raf.getChannel(), size);
        bodies = b.duplicate();
        p = s.start == 0 ? 0 : resync(s.start);
    }

    private long deferredAt = -1;
    private String deferredWhy;

    private void pendingDeferred(long at, String why) {
        deferredAt = at;
        deferredWhy = why;
        p = -1;
    }

    /** The first record the split owns (start > 0): the first position >= start where a
     * message magic or the BLANK magic sits; the rule's answer there must be "a record I
     * accept" or "the file's BLANK", else the whole split goes to the Python decoder. */
    private long resync(long start) {
        int fsize = b.limit();
        long stop = Math.min(cur.end, cur.dataEnd);
        for (int c = (int) start; c < stop && c + END_FILE_MIN_BLANK_LENGTH <= fsize; c++) {
            int m = b.getInt(c + MAGIC_AT);
            if (m == MAGIC_V1 || m == MAGIC_V2) {
                if (accept(c) > 0) {
                    return c;
                }
                pendingDeferred(start, "resync");
                return -1;
            }
            if (m == MAGIC_BLANK) {
                if (b.getInt(c + TOTALSIZE_AT) == fsize - c) {
                    return c;
                }
                pendingDeferred(start, "resync");
                return -1;
            }
        }
        done = true;  // no record starts in this split
        return -1;
    }

    /** Rows from the current split into the batch from row n; returns the new row count. */
    @Override
    protected int fill(int n) {
        if (p < 0) {
            if (deferredAt >= 0) {
                special(n++, "deferred", deferredWhy, deferredAt, cur.end - deferredAt);
                deferredAt = -1;
            }
            done = true;
            return n;
        }
        int fsize = b.limit();
        while (n < cap) {
            if (p >= cur.end) {
                // the chain leaves the split: what starts at p is the next split's, unless it
                // is damage (which the next split's resync would step over): hand it over
                int q = (int) p;
                if (q < fsize && accept(q) == 0 && !blank(q, fsize)
                        && !zerosTo(q, (int) Math.min(cur.dataEnd, fsize))) {
                    special(n++, "deferred", "chain", q, cur.end - q);
                }
                done = true;
                return n;
            }
            int at = (int) p;
            int size = accept(at);
            if (size > 0) {
                message(n++, at, size);
                p += size;
                continue;
            }
            if (blank(at, fsize)) {
                special(n++, "blank", "", at, fsize - at);
            } else if (!zerosTo(at, (int) Math.min(cur.dataEnd, fsize))) {
                special(n++, "deferred", "chain", at, cur.end - at);
            }
            done = true;
            return n;
        }
        return n;
    }

    private boolean blank(int at, int fsize) {
        return at + END_FILE_MIN_BLANK_LENGTH <= fsize && b.getInt(at + MAGIC_AT) == MAGIC_BLANK
            && b.getInt(at + TOTALSIZE_AT) == fsize - at;
    }

    private boolean zerosTo(int from, int to) {
        int q = from;
        while (q + 8 <= to) {
            if (b.getLong(q) != 0) {
                return false;
            }
            q += 8;
        }
        while (q < to) {
            if (b.get(q) != 0) {
                return false;
            }
            q++;
        }
        return true;
    }

    // --- the record rule (mqtool.formats.commitlog_fields.scan's checks) --------------------------------
    int tlw, sysFlag, bornLen, storeLen, bornPos, storeTsPos, storePos, reconPos;
    int bodyPos, bodyLen, topicPos, topicLen, propsPos, propsLen;
    // accept() copies the record's topic .. end into the arena at used (kept by message())
    private int tail;            // bytes copied
    int rTopic, rProps;  // topic and properties inside the arena
    private static final boolean BIG = ByteOrder.nativeOrder() == ByteOrder.BIG_ENDIAN;

    /** The 8 bytes of a from i (in bounds: the caller's check) as a word in the machine's
     * order: Unsafe, which the C1 compiler (a scan's JIT, session.job_conf) makes one load,
     * where a VarHandle stays a call. */
    static long word(byte[] a, int i) {
        return Platform.getLong(a, Platform.BYTE_ARRAY_OFFSET + i);
    }

    /** TOTALSIZE of the message record at p when every check holds, else 0. */
    private int accept(int p) {
        int n = b.limit();
        if (p + END_FILE_MIN_BLANK_LENGTH > n) {
            return 0;
        }
        int size = b.getInt(p + TOTALSIZE_AT);
        int magic = b.getInt(p + MAGIC_AT);
        if (magic == MAGIC_V1) {
            tlw = TOPICLEN_V1_WIDTH;
        } else if (magic == MAGIC_V2) {
            tlw = TOPICLEN_V2_WIDTH;
        } else {
            return 0;
        }
        if (size < MIN_V1 + tlw - TOPICLEN_V1_WIDTH || (long) p + size > n) {
            return 0;
        }
        int end = p + size;
        sysFlag = b.getInt(p + SYSFLAG_AT);
        bornLen = (sysFlag & BORN_V6) != 0 ? IPV6_WIDTH : IPV4_WIDTH;
        storeLen = (sysFlag & STORE_V6) != 0 ? IPV6_WIDTH : IPV4_WIDTH;
        bornPos = p + BORNHOST_AT;
        storeTsPos = bornPos + bornLen + PORT_WIDTH;
        storePos = storeTsPos + STORETIMESTAMP_WIDTH;
        reconPos = storePos + storeLen + PORT_WIDTH;
        int blenPos = reconPos + RECONSUMETIMES_WIDTH + PREPAREDTRANSACTIONOFFSET_WIDTH;
        if (blenPos + BODYLEN_WIDTH > end) {
            return 0;
        }
        bodyLen = b.getInt(blenPos);
        bodyPos = blenPos + BODYLEN_WIDTH;
        if (bodyLen < 0 || (long) bodyPos + bodyLen > end) {
            return 0;
        }
        int tl = bodyPos + bodyLen;
        if (tl + tlw > end) {
            return 0;
        }
        topicLen = tlw == TOPICLEN_V2_WIDTH ? b.getShort(tl) : b.get(tl);
        topicPos = tl + tlw;
        if (topicLen < 0 || topicPos + topicLen > end) {
            return 0;
        }
        int pl = topicPos + topicLen;
        if (pl + PROPERTIESLEN_WIDTH > end) {
            return 0;
        }
        propsLen = b.getShort(pl);
        propsPos = pl + PROPERTIESLEN_WIDTH;
        if (propsLen < 0 || propsPos + propsLen != end) {
            return 0;
        }
        if (propsLen > 0 && b.get(end - 1) == 0) {
            return 0;  // torn properties (formats.commitlog.properties_torn): the walker's damage
        }
        if (b.getLong(p + PHYSICALOFFSET_AT) != cur.base + p) {
            return 0;
        }
        // topic, properties length and properties: one copy out of the map (into the arena,
        // which the string columns refer to), read from there
        tail = end - topicPos;
        arenaRoom(tail + MSG_ID_MAX);
        b.get(topicPos, arena, used, tail);
        rTopic = used;
        rProps = used + topicLen + PROPERTIESLEN_WIDTH;
        // topic and properties in one check: the properties length between them (no column
        // refers to it) becomes two spaces, and no UTF-8 sequence runs across an ASCII byte
        arena[rProps - 2] = ' ';
        arena[rProps - 1] = ' ';
        if (!utf8(arena, rTopic, tail)) {
            return 0;
        }
        return size;
    }

    /** Well-formed UTF-8 as Python's strict decode accepts it (jit.utf8_ok). */
    private static boolean utf8(byte[] a, int start, int len) {
        int q = start;
        int end = start + len;
        while (q + 8 <= end && (word(a, q) & 0x8080808080808080L) == 0) {
            q += 8;
        }
        while (q < end) {
            int c = a[q] & 0xFF;
            if (c < 0x80) {
                q++;
                continue;
            }
            if (c < 0xC2 || c > 0xF4) {
                return false;
            }
            int k, lo, hi;
            if (c < 0xE0) {
                k = 1;
                lo = 0x80;
                hi = 0xBF;
            } else if (c < 0xF0) {
                k = 2;
                lo = c == 0xE0 ? 0xA0 : 0x80;
                hi = c == 0xED ? 0x9F : 0xBF;
            } else {
                k = 3;
                lo = c == 0xF0 ? 0x90 : 0x80;
                hi = c == 0xF4 ? 0x8F : 0xBF;
            }
            if (q + k >= end) {
                return false;
            }
            int d = a[q + 1] & 0xFF;
            if (d < lo || d > hi) {
                return false;
            }
            for (int j = 2; j <= k; j++) {
                if ((a[q + j] & 0xC0) != 0x80) {
                    return false;
                }
            }
            q += k + 1;
        }
        return true;
    }

    // --- rows --------------------------------------------------------------------------------
    /** Row ``row``: what is not a message (kind "blank" or "deferred"). */
    void special(int row, String kind, String detail, long offset, long length) {
        for (int i = 0; i < columns.length; i++) {
            if (i != cType && i != cDetail && i != cStore && i != cFile && i != cFileOffset
                    && i != cClOffset && i != cSize) {
                putNull(i, row);  // put* never clears a null: set only the others
            }
        }
        putString(cType, row, bytes(kind));
        putString(cDetail, row, bytes(detail));
        putString(cStore, row, storeBytes);
        putString(cFile, row, nameBytes);
        putLong(cFileOffset, row, offset);
        putLong(cClOffset, row, cur.base + offset);
        putInt(cSize, row, (int) length);
    }

    private static final byte[] MSG = bytes("msg");
    private static final byte[] MAGIC1 = bytes("0xdaa320a7");
    private static final byte[] MAGIC2 = bytes("0xdaa320ab");

    /** Row ``row``: the message accept() took at p (its fields in this reader's state). */
    void message(int row, int p, int size) {
        used += tail;  // the topic and properties stay in the arena
        putString(cType, row, MSG);
        putNull(cDetail, row);
        putString(cStore, row, storeBytes);
        putString(cFile, row, nameBytes);
        putLong(cFileOffset, row, p);
        long phys = cur.base + p;
        putLong(cClOffset, row, phys);
        putInt(cSize, row, size);
        putString(cMagic, row, tlw == TOPICLEN_V2_WIDTH ? MAGIC2 : MAGIC1);
        putSpan(cTopic, row, arena, rTopic, topicLen);
        putInt(cQueueId, row, b.getInt(p + QUEUEID_AT));
        putLong(cQueueOffset, row, b.getLong(p + QUEUEOFFSET_AT));
        putInt(cFlag, row, b.getInt(p + FLAG_AT));
        putInt(cSysFlag, row, sysFlag);
        int bodyCrc = b.getInt(p + BODYCRC_AT);
        putInt(cBodyCrc, row, bodyCrc);
        putLong(cBornTs, row, b.getLong(p + BORNTIMESTAMP_AT));
        if (cBornHost >= 0) {
            putString(cBornHost, row, host(bornPos, bornLen, true));
        }
        putLong(cStoreTs, row, b.getLong(storeTsPos));
        if (cStoreHost >= 0) {
            putString(cStoreHost, row, host(storePos, storeLen, false));
        }
        putInt(cReconsume, row, b.getInt(reconPos));
        putLong(cPrepared, row, b.getLong(reconPos + RECONSUMETIMES_WIDTH));
        putInt(cBodyLen, row, bodyLen);
        putSpan(cPropsRaw, row, arena, rProps, propsLen);
        if (wantSplit) {
            properties(row);
        }
        if (cMsgId >= 0) {
            msgId(row, phys);
        }
        if (cCrcOk >= 0) {
            if (opt.checkCrc) {
                fixed[cCrcOk].putBoolean(row, crcOk(bodyCrc));
            } else {
                putNull(cCrcOk, row);
            }
        }
        if ((sysFlag & COMPRESSED) != 0) {
            putString(cCompression, row, COMPRESSION[(sysFlag >> 8) & 7]);
        } else {
            putNull(cCompression, row);
        }
    }

    /** Whether the body of the message accept() took has BODYCRC ``bodyCrc``
     * (MessageDecoder's check: the CRC32 of the body, its upper bit cleared). */
    boolean crcOk(int bodyCrc) {
        crc.reset();
        bodies.limit(bodyPos + bodyLen).position(bodyPos);
        crc.update(bodies);
        return ((int) crc.getValue() & 0x7FFFFFFF) == bodyCrc;
    }

    /** "a.b.c.d:port" / "[v6]:port" (arrowcols.host_strings), the last one remembered. */
    private byte[] host(int pos, int len, boolean born) {
        int port = b.getInt(pos + len);
        if (len == IPV4_WIDTH) {
            long key = ((long) b.getInt(pos) << 32) | (port & 0xFFFFFFFFL);
            if (born && key == hostKeyB) {
                return hostB;
            }
            if (!born && key == hostKeyS) {
                return hostS;
            }
            String t = (b.get(pos) & 0xFF) + "." + (b.get(pos + 1) & 0xFF) + "."
                + (b.get(pos + 2) & 0xFF) + "." + (b.get(pos + 3) & 0xFF) + ":" + port;
            byte[] out = bytes(t);
            if (born) {
                hostKeyB = key;
                hostB = out;
            } else {
                hostKeyS = key;
                hostS = out;
            }
            return out;
        }
        return bytes("[" + ipv6(pos) + "]:" + port);
    }

    /** RFC 5952 text of the 16 bytes at pos, as Python's ipaddress.IPv6Address prints it. */
    private String ipv6(int pos) {
        int[] g = new int[8];
        for (int i = 0; i < 8; i++) {
            g[i] = b.getShort(pos + 2 * i) & 0xFFFF;
        }
        int bestStart = -1, bestLen = 0;
        for (int i = 0; i < 8; ) {
            if (g[i] != 0) {
                i++;
                continue;
            }
            int j = i;
            while (j < 8 && g[j] == 0) {
                j++;
            }
            if (j - i > bestLen) {
                bestStart = i;
                bestLen = j - i;
            }
            i = j;
        }
        if (bestLen < 2) {
            bestStart = -1;
        }
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < 8; i++) {
            if (i == bestStart) {
                sb.append(i == 0 ? "::" : ":");
                i += bestLen - 1;
                continue;
            }
            sb.append(Integer.toHexString(g[i]));
            if (i < 7) {
                sb.append(':');
            }
        }
        return sb.toString();
    }

    /** MessageDecoder#createMessageId: upper hex of store address, port, PHYSICALOFFSET. */
    private void msgId(int row, long phys) {
        byte[] a = arena;  // (accept() left room for MSG_ID_MAX bytes)
        int start = used;
        int q = start;
        for (int k = 0; k < storeLen; k++) {
            int v = b.get(storePos + k) & 0xFF;
            a[q++] = HEX_HI[v];
            a[q++] = HEX_LO[v];
        }
        int port = b.getInt(storePos + storeLen);
        for (int sh = 24; sh >= 0; sh -= 8) {
            int v = (port >>> sh) & 0xFF;
            a[q++] = HEX_HI[v];
            a[q++] = HEX_LO[v];
        }
        for (int sh = 56; sh >= 0; sh -= 8) {
            int v = (int) (phys >>> sh) & 0xFF;
            a[q++] = HEX_HI[v];
            a[q++] = HEX_LO[v];
        }
        used = q;
        strings[cMsgId].put(row, a, start, q - start);
    }

    /** string2messageProperties (commitlog_fields.split_properties): pairs in order, the last duplicate
     * kept; TAGS / KEYS / UNIQ_KEY picked. */
    private void properties(int row) {
        boolean valid = true;
        byte[] rec = arena;
        if (propsOnlyFor) {
            valid = false;
            for (byte[] pb : propsFor) {
                if (topicLen >= pb.length && same(rec, rTopic, pb)) {
                    valid = true;
                    break;
                }
            }
        }
        if (!valid) {
            putNull(cProps, row);
            for (int c : pickedCols) {
                putNull(c, row);
            }
            return;
        }
        int m = pairs();
        if (cProps >= 0) {
            m = dedup(m);
            MapColumn map = maps[cProps];
            int first = map.begin(m);
            for (int j = 0; j < m; j++) {
                map.keys.put(first + j, rec, pairs[4 * j], pairs[4 * j + 1]);
                map.values.put(first + j, rec, pairs[4 * j + 2], pairs[4 * j + 3]);
            }
            map.put(row, m);
        }
        pick(m);
        for (int t = 0; t < 3; t++) {
            int j = picked[t];
            if (j < 0) {
                putNull(pickedCols[t], row);
            } else {
                putSpan(pickedCols[t], row, rec, pairs[4 * j + 2], pairs[4 * j + 3]);
            }
        }
    }

    /** The properties of the message accept() took as string2messageProperties reads them
     * (kernel.split_properties): pairs split at byte 2, name and value at the pair's first
     * byte 1, kept when both are non-empty. Into pairs, in order and duplicates kept (the last
     * of a name is the one a map keeps: dedup()): the arena positions of name, its length,
     * value, its length. Returns their number. */
    int pairs() {
        byte[] rec = arena;
        int m = 0;
        int seg = rProps;
        int e = rProps + propsLen;
        int kv = -1;
        for (int q = seg; q <= e; q++) {
            // to the next byte below 3 (a separator, 1 or 2, or a 0), eight bytes at a time:
            // the lowest flag of hasless(w, 3) is exact (a borrow only runs upwards)
            while (q + 8 <= e) {
                long w = BIG ? Long.reverseBytes(word(rec, q)) : word(rec, q);  // little-endian
                long t = (w - 0x0303030303030303L) & ~w & 0x8080808080808080L;
                if (t != 0) {  // its byte: a multiply (no call in C1, unlike trailing zeros)
                    q += (int) ((((t & -t) >>> 7) * 0x0001020304050607L) >>> 56);
                    break;
                }
                q += 8;
            }
            int c = q < e ? rec[q] : 2;
            if (c == 1) {
                if (kv < 0) {
                    kv = q;
                }
            } else if (c == 2) {
                if (kv > seg && kv < q - 1) {
                    if (4 * (m + 1) > pairs.length) {
                        pairs = java.util.Arrays.copyOf(pairs, pairs.length * 2);
                    }
                    pairs[4 * m] = seg;
                    pairs[4 * m + 1] = kv - seg;
                    pairs[4 * m + 2] = kv + 1;
                    pairs[4 * m + 3] = q - kv - 1;
                    m++;
                }
                seg = q + 1;
                kv = -1;
            }
        }
        return m;
    }

    /** The first m pairs less those a later pair of the same name replaces, in order (the
     * order of the last occurrences, as the map keeps them); returns how many stay. */
    private int dedup(int m) {
        byte[] rec = arena;
        int k = 0;
        for (int j = 0; j < m; j++) {
            int at = pairs[4 * j];
            int len = pairs[4 * j + 1];
            boolean replaced = false;
            for (int i = j + 1; i < m && !replaced; i++) {
                replaced = pairs[4 * i + 1] == len && sameSpan(rec, pairs[4 * i], at, len);
            }
            if (!replaced) {
                System.arraycopy(pairs, 4 * j, pairs, 4 * k, 4);
                k++;
            }
        }
        return k;
    }

    /** picked: the last of the first m pairs named TAGS, KEYS, UNIQ_KEY (-1: none), each
     * name compared as one int or long. */
    void pick(int m) {
        byte[] rec = arena;
        picked[0] = picked[1] = picked[2] = -1;
        for (int j = 0; j < m; j++) {
            int klen = pairs[4 * j + 1];
            if (klen == 4) {
                int k = Platform.getInt(rec, Platform.BYTE_ARRAY_OFFSET + pairs[4 * j]);
                if (k == PICK_TAGS) {
                    picked[0] = j;
                } else if (k == PICK_KEYS) {
                    picked[1] = j;
                }
            } else if (klen == 8 && word(rec, pairs[4 * j]) == PICK_UNIQ) {
                picked[2] = j;
            }
        }
    }

    /** The last of the first m pairs named ``name`` (-1: none). */
    int last(int m, byte[] name) {
        for (int j = m - 1; j >= 0; j--) {
            if (pairs[4 * j + 1] == name.length && same(arena, pairs[4 * j], name)) {
                return j;
            }
        }
        return -1;
    }

    static boolean same(byte[] a, int pos, byte[] want) {
        for (int k = 0; k < want.length; k++) {
            if (a[pos + k] != want[k]) {
                return false;
            }
        }
        return true;
    }

    private static boolean sameSpan(byte[] a, int x, int y, int len) {
        for (int k = 0; k < len; k++) {
            if (a[x + k] != a[y + k]) {
                return false;
            }
        }
        return true;
    }
}
