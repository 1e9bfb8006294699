"""Message ids: ``MessageDecoder#createMessageId`` (offsetMsgId), ``MessageClientIDSetter``
(UNIQ_KEY) and the 5.x gRPC ``MessageIdCodec`` ids.

- offsetMsgId: hex of store IP (4 or 16 bytes) + port i32 + commitlog offset i64: 32 or 56 hex.
- UNIQ_KEY: hex of client IP (4 or 16) + pid i16 + classLoader hash i32 + ms since the start of
  the producer's month i32 + counter i16: 32 or 56 hex. The month is not in the id; an offline
  reader anchors it on the record's own born/store timestamp.
- 5.x: ``01`` + MAC(6) + pid(2) + seconds since 2021-01-01T00:00Z (4) + sequence (4): 34 hex.
Big-endian throughout.
"""

from __future__ import annotations

import ipaddress
import struct
import time
from dataclasses import dataclass

from mqtool.formats.errors import FormatError

V5_EPOCH_S = 1609459200  # 2021-01-01T00:00:00Z


@dataclass(frozen=True, slots=True)
class OffsetMsgId:
    """An offsetMsgId's fields: the broker's store address and the record's commitlog offset."""

    ip: str
    port: int
    commit_log_offset: int


@dataclass(frozen=True, slots=True)
class UniqKey:
    """A UNIQ_KEY's fields (``MessageClientIDSetter``: address, pid, class-loader hash, time,
    counter)."""

    ip: str
    pid: int
    class_loader_hash: int
    ms_in_month: int
    counter: int

    def timestamp(self, anchor_ms: int) -> int:
        """Epoch ms of the id, taking the month from ``anchor_ms`` (UTC month start).

        Like ``MessageClientIDSetter#getNearlyTimeFromID`` but anchored on a known time of the
        record instead of "now": when the result lands after the anchor by more than a day,
        the previous month is taken.
        """
        import calendar

        t = time.gmtime(anchor_ms / 1000)
        start = calendar.timegm((t.tm_year, t.tm_mon, 1, 0, 0, 0)) * 1000
        ts = start + self.ms_in_month
        if ts > anchor_ms + 86_400_000:
            y, m = (t.tm_year, t.tm_mon - 1) if t.tm_mon > 1 else (t.tm_year - 1, 12)
            ts = calendar.timegm((y, m, 1, 0, 0, 0)) * 1000 + self.ms_in_month
        return ts


@dataclass(frozen=True, slots=True)
class V5MessageId:
    """A RocketMQ 5.x message id's fields (the time in seconds since :data:`V5_EPOCH_S`)."""

    mac: str
    pid: int
    seconds: int
    sequence: int

    @property
    def timestamp(self) -> int:
        return (V5_EPOCH_S + self.seconds) * 1000


def _hex(s: str, n: int) -> bytes:
    try:
        raw = bytes.fromhex(s)
    except ValueError as e:
        raise FormatError(None, None, f"not a hex id: {s!r}") from e
    if len(raw) != n:
        raise FormatError(None, None, f"id {s!r} has {len(raw)} bytes, expected {n}")
    return raw


def create_offset_msg_id(ip: str, port: int, commit_log_offset: int) -> str:
    """``MessageDecoder#createMessageId``."""
    return (
        ipaddress.ip_address(ip).packed + struct.pack(">iq", port, commit_log_offset)
    ).hex().upper()


def decode_offset_msg_id(s: str) -> OffsetMsgId:
    """``MessageDecoder#decodeMessageId``: 32 (IPv4) or 56 (IPv6) hex characters."""
    if len(s) == 32:
        raw = _hex(s, 16)
        ip = str(ipaddress.IPv4Address(raw[:4]))
        port, off = struct.unpack(">iq", raw[4:])
    elif len(s) == 56:
        raw = _hex(s, 28)
        ip = str(ipaddress.IPv6Address(raw[:16]))
        port, off = struct.unpack(">iq", raw[16:])
    else:
        raise FormatError(None, None, f"an offsetMsgId has 32 or 56 hex characters, not {len(s)}")
    return OffsetMsgId(ip, port, off)


def decode_uniq_key(s: str) -> UniqKey:
    """Split a 32/56-hex UNIQ_KEY into its parts."""
    if len(s) == 32:
        raw = _hex(s, 16)
        ip, rest = str(ipaddress.IPv4Address(raw[:4])), raw[4:]
    elif len(s) == 56:
        raw = _hex(s, 28)
        ip, rest = str(ipaddress.IPv6Address(raw[:16])), raw[16:]
    else:
        raise FormatError(None, None, f"a UNIQ_KEY has 32 or 56 hex characters, not {len(s)}")
    pid, clh, ms, counter = struct.unpack(">hiih", rest)
    return UniqKey(ip, pid & 0xFFFF, clh, ms, counter & 0xFFFF)


def decode_v5_id(s: str) -> V5MessageId:
    """A 5.x gRPC client id (``01`` + 16 bytes)."""
    if len(s) != 34 or not s.startswith("01"):
        raise FormatError(None, None, f"not a 5.x message id: {s!r}")
    raw = _hex(s[2:], 16)
    mac = ":".join(f"{b:02x}" for b in raw[:6])
    pid, secs, seq = struct.unpack(">HII", raw[6:])
    return V5MessageId(mac, pid, secs, seq)


def create_uniq_key(
    ip: str, pid: int, class_loader_hash: int, ms_in_month: int, counter: int
) -> str:
    """``MessageClientIDSetter#createUniqID`` from explicit parts."""
    return (
        ipaddress.ip_address(ip).packed
        + struct.pack(
            ">hiih", ((pid & 0xFFFF) ^ 0x8000) - 0x8000, class_loader_hash, ms_in_month,
            ((counter & 0xFFFF) ^ 0x8000) - 0x8000,
        )
    ).hex().upper()


def classify_id(s: str) -> str:
    """``offsetMsgId|uniqKey`` (32/56 hex: either, decided by looking), ``v5``, or ``invalid``."""
    t = s.strip()
    if len(t) == 34 and t.startswith("01"):
        try:
            decode_v5_id(t)
            return "v5"
        except FormatError:
            return "invalid"
    if len(t) in (32, 56):
        try:
            bytes.fromhex(t)
        except ValueError:
            return "invalid"
        return "offsetMsgId|uniqKey"
    return "invalid"
