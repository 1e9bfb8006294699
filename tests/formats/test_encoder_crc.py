"""The encoder's BODYCRC: ``UtilAll.crc32`` & 0x7FFFFFFF of the body, in the record it packs."""

from __future__ import annotations

import random
import zlib

from mqtool.formats import encoder
from mqtool.formats.commitlog_layout import BODYCRC_AT
from mqtool.formats.encoder import pack_record_into, record_size, topic_header


def test_bodycrc_of_a_packed_record() -> None:
    rnd = random.Random(7)
    for n in (0, 1, 15, 16, 63, 64, 1024, 4097, 65536):
        body = rnd.randbytes(n)
        topic = topic_header(b"TopicA")
        props = b"TAGS\x01a\x02WAIT\x01true"
        size = record_size(0, len(body), 6, len(props))
        buf = bytearray(size)
        crc = pack_record_into(
            buf, 0, size, encoder.magic_for(6), 1, 0, 2, 3, 0, 4, b"\x7f\x00\x00\x01", 5, 6,
            b"\x7f\x00\x00\x01", 7, 0, 0, body, topic, props,
        )
        assert crc == zlib.crc32(body) & 0x7FFFFFFF
        assert int.from_bytes(buf[BODYCRC_AT : BODYCRC_AT + 4], "big") == crc
