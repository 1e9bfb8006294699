"""RocketMQ remoting frames: ``RemotingCommand`` and its two header serializations.

Mirrors org.apache.rocketmq.remoting.protocol.RemotingCommand (frame layout, JSON header via
fastjson), RocketMQSerializable (the compact ROCKETMQ header) and the Netty decoder's size limit.
All integers are big-endian. A frame on the wire::

    int32  length            bytes that follow this field (4 + header length + body length)
    int32  serialize word    high byte = SerializeType (0 JSON, 1 ROCKETMQ), low 24 bits =
                             header length
    bytes  header            JSON object, or the ROCKETMQ layout below
    bytes  body              the rest of the frame

ROCKETMQ header::

    int16 code, int8 language, int16 version, int32 opaque, int32 flag,
    int32 remarkLen + remark (UTF-8), int32 extLen + ext fields,
    each ext field: int16 keyLen + key, int32 valueLen + value (UTF-8)

Every length is checked against what is left before anything is read or allocated; a bad frame
raises :class:`FrameError` (the connection cannot be resynchronised and is closed). This module is
the codec both sides use: :class:`FrameDecoder` for the server's protocol
(:mod:`mqtool.remoting.server`), :func:`read_command` for a client's stream
(:mod:`mqtool.remoting.connection`).
"""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mqtool.formats.errors import EXIT_ENVIRONMENT, MqtoolError
from mqtool.remoting.codes import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    MQTOOL_VERSION,
    LanguageCode,
    ResponseCode,
    SerializeType,
)

#: NettyDecoder's ``com.rocketmq.remoting.frameMaxLength`` default: a whole frame, its 4-byte
#: length field included, is at most 16 MiB.
DEFAULT_MAX_FRAME = 16 * 1024 * 1024
LENGTH_FIELD_SIZE = 4
#: Smallest ROCKETMQ header: code 2 + language 1 + version 2 + opaque 4 + flag 4 + remarkLen 4
#: + extLen 4.
ROCKETMQ_HEADER_MIN = 21

_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_FIXED = struct.Struct(">hbhii")
_I16 = struct.Struct(">h")
_PREFIX = struct.Struct(">iI")
#: The header length is the low 24 bits of the serialize word.
_HEADER_MAX = 0xFFFFFF


class RemotingError(MqtoolError):
    """Anything wrong on a remoting connection (a command it ends exits 3: environment)."""

    exit_status = EXIT_ENVIRONMENT


class FrameError(RemotingError):
    """The byte stream is not a valid frame; the connection must be closed."""


class HeaderFieldError(RemotingError):
    """A request header field is missing or not of its type (answered, connection kept)."""


@dataclass
class RemotingCommand:
    """One request or response. ``ext_fields`` values are strings, as in Java's HashMap."""

    code: int
    opaque: int = 0
    flag: int = 0
    language: str = "JAVA"
    version: int = MQTOOL_VERSION
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    serialize_type: SerializeType = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        """Flag bit 0 (``RPC_TYPE``) set."""
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        """Flag bit 1 (``RPC_ONEWAY``) set: the sender expects no response."""
        return bool(self.flag & FLAG_ONEWAY)

    @classmethod
    def request(
        cls,
        code: int,
        ext: Mapping[str, object] | None = None,
        body: bytes = b"",
        *,
        opaque: int = 0,
        oneway: bool = False,
        serialize_type: SerializeType = SerializeType.JSON,
    ) -> RemotingCommand:
        """A request; ``ext`` values are coerced to strings (None dropped)."""
        return cls(
            code=int(code),
            opaque=opaque,
            flag=FLAG_ONEWAY if oneway else 0,
            ext_fields=coerce_ext(ext or {}),
            body=body,
            serialize_type=serialize_type,
        )

    def response(
        self,
        code: int = ResponseCode.SUCCESS,
        remark: str | None = None,
        ext: Mapping[str, object] | None = None,
        body: bytes = b"",
    ) -> RemotingCommand:
        """The response to this request: same opaque and serialization, response bit set."""
        return RemotingCommand(
            code=int(code),
            opaque=self.opaque,
            flag=FLAG_RESPONSE,
            remark=remark,
            ext_fields=coerce_ext(ext or {}),
            body=body,
            serialize_type=self.serialize_type,
        )


def _ext_value(key: str, value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    raise FrameError(
        f"extFields[{key!r}]: expected a string or a number, found {type(value).__name__}"
    )


def coerce_ext(ext: Mapping[str, object]) -> dict[str, str]:
    """extFields with every value a string: JSON numbers and booleans as Java prints them."""
    out: dict[str, str] = {}
    for key, value in ext.items():
        if type(value) is not str:
            if value is None:
                continue
            value = _ext_value(key, value)
        if type(key) is not str:
            raise FrameError(f"extFields key {key!r} is not a string")
        out[key] = value
    return out


# -- JSON header ------------------------------------------------------------------------------

#: Deepest JSON header accepted. RocketMQ's nest two deep (the command, its extFields); deeper
#: ones are refused before parsing, so a hostile header never recurses through the parser.
MAX_JSON_DEPTH = 32


def json_too_deep(data: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether JSON text nests arrays/objects deeper than ``limit`` (brackets in strings do not
    count). Cheap for every real header (fewer brackets than ``limit``); otherwise a few vector
    passes: which bytes are inside strings, then the depth after every bracket outside them."""
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    import numpy as np  # only a hostile or odd header gets here

    text = np.frombuffer(data.replace(b"\\\\", b"").replace(b'\\"', b""), dtype=np.uint8)
    step = np.zeros(256, dtype=np.int8)
    step[[ord("["), ord("{")]] = 1
    step[[ord("]"), ord("}")]] = -1
    steps = step[text]
    steps[(np.cumsum(text == ord('"'), dtype=np.uint8) & 1).astype(bool)] = 0  # in a string
    return int(np.cumsum(steps, dtype=np.int32).max()) > limit


def _json_int(obj: Mapping[str, Any], name: str, default: int | None, lo: int, hi: int) -> int:
    value = obj.get(name, default)
    if type(value) is int and lo <= value <= hi:
        return value
    if value is None:
        raise FrameError(f"JSON header: field {name!r} missing")
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise FrameError(f"JSON header: field {name!r} is not an integer: {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise FrameError(f"JSON header: field {name!r} out of range: {value!r}")
    return value


def decode_json_header(data: bytes) -> RemotingCommand:
    """Parse a fastjson/jsoncpp/JS header object (a trailing newline is allowed)."""
    if json_too_deep(data):
        raise FrameError(f"JSON header nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise FrameError(f"JSON header is not valid JSON: {e}") from None
    except RecursionError:  # unbalanced brackets the depth check could not pair
        raise FrameError(f"JSON header nests deeper than {MAX_JSON_DEPTH} levels") from None
    if not isinstance(obj, dict):
        raise FrameError(f"JSON header is a {type(obj).__name__}, not an object")
    ext = obj.get("extFields") or {}
    if not isinstance(ext, dict):
        raise FrameError("JSON header: extFields is not an object")
    language = obj.get("language", "JAVA")
    if isinstance(language, int) and not isinstance(language, bool):
        language = _language_name(language)
    if not isinstance(language, str):
        raise FrameError(f"JSON header: language {language!r} is not a name")
    remark = obj.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise FrameError("JSON header: remark is not a string")
    return RemotingCommand(
        code=_json_int(obj, "code", None, -(2**31), 2**31 - 1),
        opaque=_json_int(obj, "opaque", 0, -(2**31), 2**31 - 1),
        flag=_json_int(obj, "flag", 0, -(2**31), 2**31 - 1),
        language=language,
        version=_json_int(obj, "version", 0, -(2**31), 2**31 - 1),
        remark=remark,
        ext_fields=coerce_ext(ext),
        serialize_type=SerializeType.JSON,
    )


_JSON_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def encode_json_header(cmd: RemotingCommand) -> bytes:
    """fastjson's form: keys sorted, nulls omitted, compact."""
    obj: dict[str, object] = {"code": cmd.code}
    if cmd.ext_fields:
        obj["extFields"] = cmd.ext_fields
    obj["flag"] = cmd.flag
    obj["language"] = cmd.language
    obj["opaque"] = cmd.opaque
    if cmd.remark is not None:
        obj["remark"] = cmd.remark
    obj["serializeTypeCurrentRPC"] = "JSON"
    obj["version"] = cmd.version
    return _JSON_ENCODER.encode(obj).encode("utf-8")


# -- ROCKETMQ header --------------------------------------------------------------------------


def _language_name(code: int) -> str:
    try:
        return LanguageCode(code).name
    except ValueError:
        return "OTHER"


def _language_code(name: str) -> int:
    try:
        return int(LanguageCode[name])
    except KeyError:
        return int(LanguageCode.OTHER)


def decode_rocketmq_header(data: bytes) -> RemotingCommand:
    """Parse the compact ROCKETMQ header, bounds-checking every length."""
    n = len(data)
    if n < ROCKETMQ_HEADER_MIN:
        raise FrameError(f"ROCKETMQ header: {n} bytes, at least {ROCKETMQ_HEADER_MIN} needed")
    code, lang, version, opaque, flag = _FIXED.unpack_from(data, 0)
    pos = _FIXED.size
    remark_len = _I32.unpack_from(data, pos)[0]
    pos += 4
    if remark_len < 0 or remark_len > n - pos - 4:
        raise FrameError(f"ROCKETMQ header: remark length {remark_len} past the header ({n} bytes)")
    remark = _utf8(data[pos : pos + remark_len], "remark") if remark_len else None
    pos += remark_len
    ext_len = _I32.unpack_from(data, pos)[0]
    pos += 4
    if ext_len < 0 or ext_len != n - pos:
        raise FrameError(
            f"ROCKETMQ header: extFields length {ext_len}, {n - pos} bytes left in the header"
        )
    ext: dict[str, str] = {}
    end = pos + ext_len
    while pos < end:
        if end - pos < 2:
            raise FrameError(f"ROCKETMQ header: truncated extFields key length at {pos}")
        klen = _I16.unpack_from(data, pos)[0]
        pos += 2
        if klen < 0 or klen > end - pos - 4:
            raise FrameError(
                f"ROCKETMQ header: extFields key length {klen} at {pos - 2} past the end"
            )
        key = _utf8(data[pos : pos + klen], "extFields key")
        pos += klen
        vlen = _I32.unpack_from(data, pos)[0]
        pos += 4
        if vlen < 0 or vlen > end - pos:
            raise FrameError(
                f"ROCKETMQ header: extFields value length {vlen} at {pos - 4} past the end"
            )
        ext[key] = _utf8(data[pos : pos + vlen], "extFields value")
        pos += vlen
    return RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        language=_language_name(lang),
        version=version,
        remark=remark,
        ext_fields=ext,
        serialize_type=SerializeType.ROCKETMQ,
    )


def _utf8(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FrameError(f"ROCKETMQ header: {what} is not UTF-8: {e}") from None


def encode_rocketmq_header(cmd: RemotingCommand) -> bytes:
    """The compact form (code and version are Java shorts)."""
    if not -(2**15) <= cmd.code < 2**15 or not -(2**15) <= cmd.version < 2**15:
        raise RemotingError(
            f"code {cmd.code} / version {cmd.version} do not fit the ROCKETMQ header"
        )
    parts = [_FIXED.pack(cmd.code, _language_code(cmd.language), cmd.version, cmd.opaque, cmd.flag)]
    remark = cmd.remark.encode("utf-8") if cmd.remark else b""
    parts += [_I32.pack(len(remark)), remark]
    ext = bytearray()
    for key, value in cmd.ext_fields.items():
        k = key.encode("utf-8")
        v = value.encode("utf-8")
        ext += _I16.pack(len(k)) + k + _I32.pack(len(v)) + v
    parts += [_I32.pack(len(ext)), bytes(ext)]
    return b"".join(parts)


# -- whole frames -----------------------------------------------------------------------------


def encode(cmd: RemotingCommand, *, max_frame: int = DEFAULT_MAX_FRAME) -> bytes:
    """The frame for ``cmd``, length field included."""
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        header = encode_rocketmq_header(cmd)
    else:
        header = encode_json_header(cmd)
    length = 4 + len(header) + len(cmd.body)
    if length + LENGTH_FIELD_SIZE > max_frame:
        raise RemotingError(
            f"frame of {length + LENGTH_FIELD_SIZE} bytes exceeds the {max_frame}-byte limit"
        )
    if len(header) > _HEADER_MAX:
        raise RemotingError(f"header of {len(header)} bytes does not fit its 24-bit length")
    word = (int(cmd.serialize_type) << 24) | len(header)
    return _PREFIX.pack(length, word) + header + cmd.body


def check_length(length: int, *, max_frame: int = DEFAULT_MAX_FRAME) -> None:
    """Validate a frame's length field before its bytes are read."""
    if length < 4:
        raise FrameError(f"frame length {length}: below the 4-byte header-length word")
    if length + LENGTH_FIELD_SIZE > max_frame:
        raise FrameError(f"frame length {length} exceeds the {max_frame}-byte limit")


def length_of(prefix: bytes | bytearray) -> int:
    """The signed length field (first 4 bytes)."""
    return int(_I32.unpack_from(prefix, 0)[0])


def decode_payload(payload: bytes | memoryview) -> RemotingCommand:
    """A frame without its length field (the ``length`` bytes after it); from a view of the
    bytes read, the body is the one copy made."""
    if len(payload) < 4:
        raise FrameError(f"frame of {len(payload)} bytes has no header-length word")
    word = _U32.unpack_from(payload, 0)[0]
    stype = word >> 24
    hlen = word & 0xFFFFFF
    if hlen > len(payload) - 4:
        raise FrameError(f"bad header length {hlen}: only {len(payload) - 4} bytes follow")
    header = bytes(payload[4 : 4 + hlen])
    if stype == SerializeType.JSON:
        cmd = decode_json_header(header)
    elif stype == SerializeType.ROCKETMQ:
        cmd = decode_rocketmq_header(header)
    else:
        raise FrameError(f"unknown serialize type {stype} (0 JSON, 1 ROCKETMQ)")
    cmd.body = bytes(payload[4 + hlen :])
    return cmd


def decode(frame: bytes, *, max_frame: int = DEFAULT_MAX_FRAME) -> RemotingCommand:
    """Exactly one whole frame, length field included."""
    if len(frame) < LENGTH_FIELD_SIZE:
        raise FrameError(f"truncated frame: {len(frame)} bytes, no length field")
    length = length_of(frame)
    check_length(length, max_frame=max_frame)
    if len(frame) - LENGTH_FIELD_SIZE != length:
        raise FrameError(
            f"frame length field says {length} bytes, {len(frame) - LENGTH_FIELD_SIZE} present"
        )
    return decode_payload(frame[LENGTH_FIELD_SIZE:])


class FrameDecoder:
    """Incremental decoder: ``feed`` bytes, get whole commands; never buffers past the limit.

    Each frame's length (and header length) is checked as soon as its first 4 (8) bytes are
    there, before anything else of it is kept. Whole frames in the bytes fed are decoded in place;
    only an incomplete tail is buffered, and it is not touched again until enough has arrived to
    check or complete it.
    """

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buf = bytearray()
        self._need = LENGTH_FIELD_SIZE  # bytes the buffered tail needs before a new look

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame held."""
        return len(self._buf)

    @property
    def expected(self) -> int | None:
        """Length field of the incomplete frame held (None while fewer than 4 bytes are)."""
        if len(self._buf) < LENGTH_FIELD_SIZE:
            return None
        return length_of(self._buf)

    def reset(self) -> None:
        """Drop what is buffered (its memory is freed now, not when the decoder goes)."""
        self._buf = bytearray()
        self._need = LENGTH_FIELD_SIZE

    def feed(self, data: bytes) -> list[RemotingCommand]:
        """Append ``data``; return every command now complete (FrameError on a bad one)."""
        buf = self._buf
        if buf:
            buf += data
            if len(buf) < self._need:
                return []
            data = bytes(buf)
            buf.clear()
        out: list[RemotingCommand] = []
        view = memoryview(data)  # each frame's payload decoded in place, not copied first
        pos, end, max_frame = 0, len(data), self.max_frame
        while end - pos >= LENGTH_FIELD_SIZE:
            length = _I32.unpack_from(data, pos)[0]
            check_length(length, max_frame=max_frame)
            if end - pos >= 8:
                hlen = _U32.unpack_from(data, pos + 4)[0] & 0xFFFFFF
                if hlen > length - 4:
                    raise FrameError(
                        f"bad header length {hlen}: frame has {length - 4} bytes after it"
                    )
            stop = pos + LENGTH_FIELD_SIZE + length
            if stop > end:
                break
            out.append(decode_payload(view[pos + LENGTH_FIELD_SIZE : stop]))
            pos = stop
        if pos < end:
            buf += data[pos:]
            have = end - pos
            if have < LENGTH_FIELD_SIZE:
                self._need = LENGTH_FIELD_SIZE
            elif have < 8:
                self._need = 8
            else:
                self._need = LENGTH_FIELD_SIZE + length
        return out


async def read_command(
    reader: asyncio.StreamReader,
    *,
    max_frame: int = DEFAULT_MAX_FRAME,
    idle_timeout: float | None = None,
    frame_timeout: float | None = None,
) -> RemotingCommand | None:
    """The next command, or None on a clean end of stream between frames.

    FrameError: bad length/header, end of stream or timeout inside a frame.
    """
    try:
        async with asyncio.timeout(idle_timeout):  # no extra task per frame, unlike wait_for
            prefix = await reader.readexactly(LENGTH_FIELD_SIZE)
    except asyncio.IncompleteReadError as e:
        if not e.partial:
            return None
        raise FrameError(
            f"connection closed inside a length field ({len(e.partial)} of 4 bytes)"
        ) from None
    except TimeoutError:
        raise FrameError(f"idle for {idle_timeout:.0f} s") from None
    length = length_of(prefix)
    check_length(length, max_frame=max_frame)
    try:
        async with asyncio.timeout(frame_timeout):
            payload = await reader.readexactly(length)
    except asyncio.IncompleteReadError as e:
        raise FrameError(
            f"connection closed mid-frame ({len(e.partial)} of {length} bytes)"
        ) from None
    except TimeoutError:
        raise FrameError(
            f"frame of {length} bytes not complete after {frame_timeout:.0f} s"
        ) from None
    return decode_payload(payload)
