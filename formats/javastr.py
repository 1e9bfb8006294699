"""Java string semantics RocketMQ relies on: ``String.hashCode`` over UTF-16 code units.

Used for consume-queue tagsCodes (``MessageExtBrokerInner#tagsString2tagsCode``) and IndexFile key
hashes (``IndexFile#indexKeyHashMethod``).
"""

from __future__ import annotations


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16, signed int32."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h
