// Generated from formats/commitlog_layout.py by `make spark-layout`: do not edit.
package mqtool.spark;

/** The commitlog record layout: offsets from a record's first byte, widths in bytes,
 * and the magic codes and SYSFLAG bits that decide it (big-endian). */
final class RecordLayout {
    private RecordLayout() {
    }

    static final int TOTALSIZE_AT = 0;
    static final int MAGIC_AT = 4;
    static final int BODYCRC_AT = 8;
    static final int QUEUEID_AT = 12;
    static final int FLAG_AT = 16;
    static final int QUEUEOFFSET_AT = 20;
    static final int PHYSICALOFFSET_AT = 28;
    static final int SYSFLAG_AT = 36;
    static final int BORNTIMESTAMP_AT = 40;
    static final int BORNHOST_AT = 48;
    static final int IPV4_WIDTH = 4;
    static final int IPV6_WIDTH = 16;
    static final int PORT_WIDTH = 4;
    static final int STORETIMESTAMP_WIDTH = 8;
    static final int RECONSUMETIMES_WIDTH = 4;
    static final int PREPAREDTRANSACTIONOFFSET_WIDTH = 8;
    static final int BODYLEN_WIDTH = 4;
    static final int TOPICLEN_V1_WIDTH = 1;
    static final int TOPICLEN_V2_WIDTH = 2;
    static final int PROPERTIESLEN_WIDTH = 2;
    static final int FIXED_WIDTH = 82;
    static final int MIN_RECORD_SIZE = 91;
    static final int MESSAGE_MAGIC_CODE = 0xDAA320A7;
    static final int MESSAGE_MAGIC_CODE_V2 = 0xDAA320AB;
    static final int BLANK_MAGIC_CODE = 0xCBD43194;
    static final int END_FILE_MIN_BLANK_LENGTH = 8;
    static final int BORNHOST_V6_FLAG = 0x10;
    static final int STOREHOSTADDRESS_V6_FLAG = 0x20;
}
