"""Broker config JSON files (``store/config/*.json``) in fastjson 1.x's dialect.

Mirrors ``org.apache.rocketmq.remoting.protocol.RemotingSerializable#toJson(obj, prettyFormat)``
(``com.alibaba.fastjson.JSON.toJSONString``; fastjson 1.2.69 in 4.9.x, 1.2.83 in 5.x) as used by
``ConfigManager#persist`` for ``delayOffset.json`` (``ScheduleMessageService``),
``consumerOffset.json`` (``ConsumerOffsetManager``), ``topics.json`` (``TopicConfigManager``),
``subscriptionGroup.json`` (``SubscriptionGroupManager``) and the compact ``timermetrics``
(``TimerMetrics``). Text, not bytes: the files are UTF-8 JSON-like text (no byte order).

fastjson's dialect differs from JSON in ways a writer must copy byte for byte:

* map keys that are not Strings (``Integer`` queue ids / delay levels) are written unquoted:
  ``{2:1,3:6}``;
* pretty printing uses tabs and ``JSONSerializer#println`` (``"\\n"`` + one tab per level):
  ``MapSerializer`` breaks the line *before* every String-keyed entry but not before a
  non-String-keyed one, and always closes a non-empty map with a line break, hence
  ``"offsetTable":{2:1,16:1\\n\\t}``; beans (``JavaBeanSerializer``) put every field on its own
  line and sort fields alphabetically; ``ListSerializer`` puts items on their own lines, while
  other collections (``CollectionCodec``: ``Set``) stay on one line even in pretty mode;
* empty maps and lists are ``{}`` / ``[]``; the files carry no trailing newline.

:func:`loads_fastjson` is a lenient tokenizer-based parser that returns plain Python values
(int keys stay ``int``) and remembers only what a plain value cannot say (pretty vs compact
document, one-line collections, odd empty objects) in the :class:`FastjsonDict` /
:class:`FastjsonList` subclasses; :func:`dumps_fastjson` writes them back so that
``dumps_fastjson(loads_fastjson(text)) == text`` for everything fastjson writes.

This module is pure: no file IO (writing ``<file>.bak`` then the file is the store engine's job).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from mqtool.formats.errors import FormatError
from mqtool.formats.javacompat import chm_order, hashmap_order
from mqtool.formats.rules import DEFAULT_MAX_RECONSUME_TIMES

__all__ = [
    "CONSUMER_OFFSET_TABLE_CAPACITY",
    "SUBSCRIPTION_GROUP_TABLE_CAPACITY",
    "TOPIC_CONFIG_TABLE_CAPACITY",
    "TOPIC_GROUP_SEPARATOR",
    "ConsumerOffsets",
    "DataVersion",
    "DelayOffsetTable",
    "FastjsonDict",
    "FastjsonList",
    "SubscriptionGroupConfig",
    "SubscriptionGroups",
    "TopicConfig",
    "TopicConfigs",
    "build_consumer_offset",
    "build_delay_offset",
    "build_subscription_groups",
    "build_topics",
    "chm_order",
    "default_subscription_group_fields",
    "dumps_fastjson",
    "java_double_to_string",
    "java_set",
    "loads_fastjson",
    "parse_consumer_offset",
    "parse_delay_offset",
    "parse_subscription_groups",
    "parse_topics",
]

# ConsumerOffsetManager.TOPIC_GROUP_SEPARATOR: offsetTable keys are "<topic>@<group>".
TOPIC_GROUP_SEPARATOR = "@"
# Initial capacities of the ConcurrentHashMaps the broker serializes (iteration order follows
# the hash buckets of the resulting table, see chm_order).
TOPIC_CONFIG_TABLE_CAPACITY = 1024  # TopicConfigManager.topicConfigTable
SUBSCRIPTION_GROUP_TABLE_CAPACITY = 1024  # SubscriptionGroupManager.subscriptionGroupTable
CONSUMER_OFFSET_TABLE_CAPACITY = 512  # ConsumerOffsetManager.offsetTable


# --------------------------------------------------------------------------------------------
# Layout-carrying containers


class FastjsonDict(dict[Any, Any]):
    """A JSON object that remembers layout facts a plain ``dict`` loses.

    ``pretty`` (top level only): whether the document was pretty-printed (``None``: unknown, the
    writer's default applies). ``empty_layout``: for an *empty* object, the exact whitespace
    between its braces (fastjson writes ``{\\n\\t\\n}`` for a bean whose getters all returned
    null, ``{\\n\\t}`` for a map whose values were all null).
    """

    __slots__ = ("pretty", "empty_layout")

    def __init__(
        self,
        items: Mapping[Any, Any] | Iterable[tuple[Any, Any]] = (),
        /,
        *,
        pretty: bool | None = None,
        empty_layout: str | None = None,
    ) -> None:
        super().__init__(items)
        self.pretty = pretty
        self.empty_layout = empty_layout


class FastjsonList(list[Any]):
    """A JSON array that remembers layout facts a plain ``list`` loses.

    ``one_line``: written on one line even in a pretty document, as fastjson's ``CollectionCodec``
    does for a ``java.util.Set`` (``groupTopicMap`` values). ``pretty`` (top level only): as in
    :class:`FastjsonDict`.
    """

    __slots__ = ("pretty", "one_line")

    def __init__(
        self, items: Iterable[Any] = (), /, *, one_line: bool = False, pretty: bool | None = None
    ) -> None:
        super().__init__(items)
        self.one_line = one_line
        self.pretty = pretty


def java_set(items: Iterable[Any]) -> FastjsonList:
    """An array written the way fastjson writes a ``java.util.Set`` (one line, given order)."""
    return FastjsonList(items, one_line=True)


# --------------------------------------------------------------------------------------------
# Parser

_WS = " \t\n\r\f\b"  # JSONLexerBase#skipWhitespace also skips \f and \b
_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "'": "'",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",  # fastjson accepts \v (and writes \u000B)
    "F": "\f",
}
_NUM_START = "-+0123456789."


class _Parser:
    def __init__(self, text: str, file: str | None) -> None:
        self.text = text
        self.file = file
        self.pos = 0
        self.saw_ws = False  # whitespace between tokens: the document is pretty-printed

    def error(self, detail: str, pos: int | None = None) -> FormatError:
        return FormatError(self.file, self.pos if pos is None else pos, detail)

    def skip_ws(self) -> None:
        text, pos, n = self.text, self.pos, len(self.text)
        start = pos
        while pos < n and text[pos] in _WS:
            pos += 1
        if pos != start:
            self.saw_ws = True
        self.pos = pos

    def peek(self) -> str:
        if self.pos >= len(self.text):
            raise self.error("unexpected end of input")
        return self.text[self.pos]

    def parse_document(self) -> Any:
        text = self.text
        if text.startswith("\ufeff"):  # tolerated, like fastjson's lexer
            self.pos = 1
        self.skip_ws()
        if self.pos >= len(text):
            raise self.error(
                "empty input: expected a JSON value" if not text else "only whitespace"
            )
        self.saw_ws = False
        value = self.parse_value()
        pretty = self.saw_ws
        self.skip_ws()
        if self.pos != len(text):
            raise self.error(f"trailing data after JSON value: {text[self.pos : self.pos + 16]!r}")
        if isinstance(value, FastjsonDict | FastjsonList):
            value.pretty = pretty
        elif isinstance(value, dict):
            value = FastjsonDict(value, pretty=pretty)
        elif isinstance(value, list):
            value = FastjsonList(value, pretty=pretty)
        return value

    def parse_value(self) -> Any:
        self.skip_ws()
        ch = self.peek()
        if ch == "{":
            return self.parse_object()
        if ch == "[":
            return self.parse_array()
        if ch == '"' or ch == "'":
            return self.parse_string()
        if ch in _NUM_START:
            return self.parse_number()
        for word, value in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return value
        raise self.error(f"unexpected character {ch!r}: expected a JSON value")

    def parse_object(self) -> dict[Any, Any]:
        start = self.pos
        self.pos += 1  # '{'
        result: dict[Any, Any] = {}
        inner_start = self.pos
        self.skip_ws()
        if self.peek() == "}":
            ws = self.text[inner_start : self.pos]
            self.pos += 1
            return FastjsonDict(empty_layout=ws) if ws else {}
        while True:
            self.skip_ws()
            ch = self.peek()
            key_pos = self.pos
            key: Any
            if ch == '"' or ch == "'":
                key = self.parse_string()
            elif ch in _NUM_START:
                key = self.parse_number()
                if not isinstance(key, int):
                    raise self.error(f"non-integer number as object key: {key!r}", key_pos)
            elif ch == "}" and result:
                self.pos += 1  # trailing comma, accepted like fastjson does
                return result
            else:
                raise self.error(f"unexpected character {ch!r}: expected an object key", key_pos)
            self.skip_ws()
            if self.peek() != ":":
                raise self.error(f"expected ':' after object key, found {self.peek()!r}")
            self.pos += 1
            if key in result:
                raise self.error(f"duplicate object key {key!r}", key_pos)
            result[key] = self.parse_value()
            self.skip_ws()
            ch = self.peek()
            if ch == ",":
                self.pos += 1
            elif ch == "}":
                self.pos += 1
                return result
            else:
                raise self.error(
                    f"expected ',' or '}}' in object opened at {start:#x}, found {ch!r}"
                )

    def parse_array(self) -> list[Any]:
        start = self.pos
        self.pos += 1  # '['
        one_line = self.pos < len(self.text) and self.text[self.pos] not in _WS
        items: list[Any] = []
        self.skip_ws()
        if self.peek() == "]":
            self.pos += 1
            return items
        while True:
            items.append(self.parse_value())
            self.skip_ws()
            ch = self.peek()
            if ch == ",":
                self.pos += 1
                self.skip_ws()
                if self.peek() == "]":  # trailing comma
                    self.pos += 1
                    break
            elif ch == "]":
                self.pos += 1
                break
            else:
                raise self.error(f"expected ',' or ']' in array opened at {start:#x}, found {ch!r}")
        return FastjsonList(items, one_line=True) if one_line else items

    def parse_string(self) -> str:
        text = self.text
        quote = text[self.pos]
        start = self.pos
        pos = self.pos + 1
        parts: list[str] = []
        n = len(text)
        while True:
            end = pos
            while end < n and text[end] != quote and text[end] != "\\":
                end += 1
            parts.append(text[pos:end])
            if end >= n:
                raise self.error(f"unterminated string opened at {start:#x}", n)
            if text[end] == quote:
                self.pos = end + 1
                return "".join(parts)
            # backslash escape
            if end + 1 >= n:
                raise self.error(f"unterminated string opened at {start:#x}", n)
            esc = text[end + 1]
            if esc in _ESCAPES:
                parts.append(_ESCAPES[esc])
                pos = end + 2
            elif esc in "01234567":
                parts.append(chr(int(esc)))
                pos = end + 2
            elif esc == "u" or esc == "x":
                width = 4 if esc == "u" else 2
                digits = text[end + 2 : end + 2 + width]
                if len(digits) != width or any(c not in "0123456789abcdefABCDEF" for c in digits):
                    raise self.error(f"bad \\{esc} escape {text[end : end + 2 + width]!r}", end)
                parts.append(chr(int(digits, 16)))
                pos = end + 2 + width
            else:
                raise self.error(f"bad escape \\{esc} in string", end)

    def parse_number(self) -> int | float:
        text, start, n = self.text, self.pos, len(self.text)
        pos = start
        if text[pos] in "+-":
            pos += 1
        digits_start = pos
        while pos < n and text[pos].isdigit() and text[pos].isascii():
            pos += 1
        is_float = False
        if pos < n and text[pos] == ".":
            is_float = True
            pos += 1
            while pos < n and text[pos].isdigit() and text[pos].isascii():
                pos += 1
        if pos < n and text[pos] in "eE":
            is_float = True
            pos += 1
            if pos < n and text[pos] in "+-":
                pos += 1
            exp_start = pos
            while pos < n and text[pos].isdigit() and text[pos].isascii():
                pos += 1
            if pos == exp_start:
                raise self.error(f"bad number {text[start:pos]!r}", start)
        token = text[start:pos]
        if pos == digits_start or token in ("-.", "+.", "."):
            raise self.error(f"bad number {token!r}", start)
        self.pos = pos
        try:
            return float(token) if is_float else int(token)
        except ValueError as e:
            raise self.error(f"bad number {token!r}", start) from e


def loads_fastjson(text: str, *, file: str | None = None) -> Any:
    """Parse fastjson-written JSON text (unquoted integer keys, tabs, single quotes accepted).

    Objects become ``dict`` (String keys ``str``, numeric keys ``int``), arrays ``list``; the top
    level is a :class:`FastjsonDict`/:class:`FastjsonList` recording whether the document was
    pretty-printed. Raises :class:`FormatError` naming ``file`` and the character offset for
    empty, truncated or malformed input.
    """
    if not isinstance(text, str):
        raise FormatError(file, None, f"expected text, got {type(text).__name__}")
    try:
        return _Parser(text, file).parse_document()
    except RecursionError as e:
        raise FormatError(file, None, "JSON nested too deeply") from e


# --------------------------------------------------------------------------------------------
# Writer


def _escape_char(ch: str) -> str:
    code = ord(ch)
    if ch == '"':
        return '\\"'
    if ch == "\\":
        return "\\\\"
    if ch in "\b\t\n\f\r":
        return {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}[ch]
    # CharTypes.specicalFlags_doubleQuotes: other C0 controls, DEL..0x9F and U+2028/U+2029 are
    # written as \\uXXXX with upper-case hex (IOUtils.DIGITS).
    if code < 0x20 or 0x7F <= code < 0xA0 or code in (0x2028, 0x2029):
        return f"\\u{code:04X}"
    return ch


def _needs_escape(s: str) -> bool:
    return any(
        c in '"\\' or ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or c in "\u2028\u2029" for c in s
    )


def _quote(s: str) -> str:
    if not _needs_escape(s):
        return f'"{s}"'
    return '"' + "".join(_escape_char(c) for c in s) + '"'


def java_double_to_string(v: float) -> str:
    """``double`` as fastjson writes it (shortest digits, Java's ``1.0E10`` / ``0.001`` forms)."""
    if math.isnan(v) or math.isinf(v):
        return "null"
    if v == 0.0:
        return "-0.0" if math.copysign(1.0, v) < 0 else "0.0"
    sign, digit_tuple, exp = Decimal(repr(v)).as_tuple()
    assert isinstance(exp, int)
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    exp += len("".join(map(str, digit_tuple))) - len(digits)
    point = len(digits) + exp  # decimal point position relative to the digit string
    prefix = "-" if sign else ""
    if 1e-3 <= abs(v) < 1e7:
        if point <= 0:
            return f"{prefix}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{prefix}{digits}{'0' * (point - len(digits))}.0"
        return f"{prefix}{digits[:point]}.{digits[point:]}"
    return f"{prefix}{digits[0]}.{digits[1:] or '0'}E{point - 1}"


def _write(out: list[str], value: Any, indent: int, pretty: bool) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(str(int(value)))
    elif isinstance(value, float):
        out.append(java_double_to_string(value))
    elif isinstance(value, str):
        out.append(_quote(value))
    elif isinstance(value, Mapping):
        _write_map(out, value, indent, pretty)
    elif isinstance(value, list | tuple):
        _write_list(out, value, indent, pretty)
    else:
        raise TypeError(f"cannot write {type(value).__name__} as fastjson")


def _write_map(out: list[str], m: Mapping[Any, Any], indent: int, pretty: bool) -> None:
    if not m:
        layout = m.empty_layout if isinstance(m, FastjsonDict) else None
        out.append("{" + (layout if pretty and layout else "") + "}")
        return
    # MapSerializer / JavaBeanSerializer with SerializerFeature.PrettyFormat
    out.append("{")
    inner = "\n" + "\t" * (indent + 1)
    first = True
    for key, item in m.items():
        if not first:
            out.append(",")
        first = False
        if isinstance(key, str):
            if pretty:
                out.append(inner)
            out.append(_quote(key))
        elif isinstance(key, int) and not isinstance(key, bool):
            out.append(str(int(key)))
        else:
            raise TypeError(f"cannot write map key of type {type(key).__name__} as fastjson")
        out.append(":")
        _write(out, item, indent + 1, pretty)
    if pretty:
        out.append("\n" + "\t" * indent)
    out.append("}")


def _write_list(out: list[str], seq: Sequence[Any], indent: int, pretty: bool) -> None:
    if not seq:
        out.append("[]")
        return
    if not pretty or (isinstance(seq, FastjsonList) and seq.one_line):
        # CollectionCodec (and any list in compact mode): one line, items at the same indent
        out.append("[")
        for i, item in enumerate(seq):
            if i:
                out.append(",")
            _write(out, item, indent, pretty)
        out.append("]")
        return
    # ListSerializer with PrettyFormat
    out.append("[")
    inner = "\n" + "\t" * (indent + 1)
    for i, item in enumerate(seq):
        if i:
            out.append(",")
        out.append(inner)
        _write(out, item, indent + 1, pretty)
    out.append("\n" + "\t" * indent + "]")


def dumps_fastjson(obj: Any, *, pretty: bool | None = None) -> str:
    """Write ``obj`` exactly as fastjson 1.x ``JSON.toJSONString(obj, pretty)`` does.

    ``pretty=None`` uses the layout recorded by :func:`loads_fastjson` on the top-level value
    (:class:`FastjsonDict`/:class:`FastjsonList`), else pretty (what ``ConfigManager`` writes).
    Keys are written in the mapping's order: pass bean fields sorted (fastjson sorts them) and
    maps in the broker's hash order (:func:`chm_order`). ``int`` keys are written unquoted.
    """
    if pretty is None:
        recorded = (
            getattr(obj, "pretty", None) if isinstance(obj, FastjsonDict | FastjsonList) else None
        )
        pretty = True if recorded is None else bool(recorded)
    out: list[str] = []
    _write(out, obj, 0, pretty)
    return "".join(out)


# --------------------------------------------------------------------------------------------
# Typed records


@dataclass(frozen=True, slots=True)
class DataVersion:
    """``org.apache.rocketmq.remoting.protocol.DataVersion`` (timestamp in epoch ms)."""

    counter: int
    timestamp: int
    state_version: int | None = 0  # None: field absent (older brokers)

    def to_json_obj(self) -> dict[str, int]:
        """Bean fields in fastjson's (alphabetical) order."""
        obj = {"counter": self.counter}
        if self.state_version is not None:
            obj["stateVersion"] = self.state_version
        obj["timestamp"] = self.timestamp
        return obj

    @classmethod
    def from_json_obj(cls, obj: Any, *, file: str | None = None) -> DataVersion:
        """Read a ``dataVersion`` object (``counter`` and ``timestamp`` required)."""
        if not isinstance(obj, Mapping):
            raise FormatError(file, None, f"dataVersion: expected an object, found {obj!r}")
        counter = _int_field(obj, "counter", file, "dataVersion")
        timestamp = _int_field(obj, "timestamp", file, "dataVersion")
        state = obj.get("stateVersion")
        if state is not None and not _is_int(state):
            raise FormatError(
                file, None, f"dataVersion.stateVersion: expected int, found {state!r}"
            )
        unknown = set(obj) - {"counter", "timestamp", "stateVersion"}
        if unknown:
            raise FormatError(
                file, None, f"dataVersion: unknown fields {sorted(map(str, unknown))}"
            )
        return cls(counter=counter, timestamp=timestamp, state_version=state)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _int_field(obj: Mapping[Any, Any], name: str, file: str | None, where: str) -> int:
    v = obj.get(name)
    if not _is_int(v):
        raise FormatError(file, None, f"{where}.{name}: expected int, found {v!r}")
    assert isinstance(v, int)
    return v


def _load_object(text: str, file: str | None, what: str) -> Mapping[Any, Any]:
    obj = loads_fastjson(text, file=file)
    if not isinstance(obj, Mapping):
        raise FormatError(file, 0, f"{what}: expected a JSON object at top level")
    return obj


def _int_table(obj: Any, file: str | None, where: str) -> dict[int, int]:
    if not isinstance(obj, Mapping):
        raise FormatError(file, None, f"{where}: expected an object, found {obj!r}")
    table: dict[int, int] = {}
    for k, v in obj.items():
        if not _is_int(k) or not _is_int(v):
            raise FormatError(
                file, None, f"{where}: expected <int>:<int> entries, found {k!r}:{v!r}"
            )
        table[k] = v
    return table


@dataclass(frozen=True, slots=True)
class DelayOffsetTable:
    """``delayOffset.json`` (``DelayOffsetSerializeWrapper``).

    ``offset_table``: delay level (1-based) -> next consume-queue offset of
    ``SCHEDULE_TOPIC_XXXX`` queue ``level - 1``. ``data_version`` present from 5.x on.
    """

    offset_table: Mapping[int, int]
    data_version: DataVersion | None = None


def parse_delay_offset(text: str, *, file: str | None = None) -> DelayOffsetTable:
    """Parse ``delayOffset.json`` text."""
    obj = _load_object(text, file, "delayOffset.json")
    unknown = set(obj) - {"offsetTable", "dataVersion"}
    if unknown:
        raise FormatError(
            file, None, f"delayOffset.json: unknown fields {sorted(map(str, unknown))}"
        )
    dv = obj.get("dataVersion")
    return DelayOffsetTable(
        offset_table=_int_table(obj.get("offsetTable", {}), file, "offsetTable"),
        data_version=None if dv is None else DataVersion.from_json_obj(dv, file=file),
    )


def build_delay_offset(
    table: Mapping[int, int] | DelayOffsetTable, data_version: DataVersion | None = None
) -> str:
    """``delayOffset.json`` text as RocketMQ writes it (4.9.7 without, 5.x with ``data_version``).

    Levels are written ascending (the broker's ``ConcurrentHashMap(32)`` iterates small ints in
    order).
    """
    if isinstance(table, DelayOffsetTable):
        data_version = table.data_version if data_version is None else data_version
        table = table.offset_table
    obj: dict[str, Any] = {}
    if data_version is not None:
        obj["dataVersion"] = data_version.to_json_obj()
    obj["offsetTable"] = {int(k): int(table[k]) for k in sorted(table)}
    return dumps_fastjson(obj, pretty=True)


@dataclass(frozen=True, slots=True)
class ConsumerOffsets:
    """``consumerOffset.json`` (``ConsumerOffsetManager``).

    ``offset_table``: ``"<topic>@<group>"`` (also ``"<topic>@<group>@broadcast"``-style extra
    keys) -> {queueId: next offset}. ``group_topic_map`` (5.x) is the derived getter fastjson
    serializes: group -> topics. ``lmq_offset_table`` (5.x) kept as read.
    """

    offset_table: Mapping[str, Mapping[int, int]]
    data_version: DataVersion | None = None
    group_topic_map: Mapping[str, Sequence[str]] | None = None
    lmq_offset_table: Mapping[Any, Any] | None = None

    def topic_group(self, key: str) -> tuple[str, str]:
        """Split an offsetTable key into (topic, group)."""
        topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
        return topic, group


def parse_consumer_offset(text: str, *, file: str | None = None) -> ConsumerOffsets:
    """Parse ``consumerOffset.json`` text."""
    obj = _load_object(text, file, "consumerOffset.json")
    unknown = set(obj) - {"offsetTable", "dataVersion", "groupTopicMap", "lmqOffsetTable"}
    if unknown:
        raise FormatError(
            file, None, f"consumerOffset.json: unknown fields {sorted(map(str, unknown))}"
        )
    raw = obj.get("offsetTable", {})
    if not isinstance(raw, Mapping):
        raise FormatError(file, None, "offsetTable: expected an object")
    offsets: dict[str, Mapping[int, int]] = {}
    for key, qmap in raw.items():
        if not isinstance(key, str):
            raise FormatError(
                file, None, f'offsetTable: expected "topic@group" keys, found {key!r}'
            )
        offsets[key] = _int_table(qmap, file, f"offsetTable[{key!r}]")
    gtm = obj.get("groupTopicMap")
    group_topic_map: dict[str, Sequence[str]] | None = None
    if gtm is not None:
        if not isinstance(gtm, Mapping) or not all(
            isinstance(g, str) and isinstance(ts, list) and all(isinstance(t, str) for t in ts)
            for g, ts in gtm.items()
        ):
            raise FormatError(file, None, "groupTopicMap: expected {group: [topics]}")
        group_topic_map = {g: list(ts) for g, ts in gtm.items()}
    lmq = obj.get("lmqOffsetTable")
    if lmq is not None and not isinstance(lmq, Mapping):
        raise FormatError(file, None, "lmqOffsetTable: expected an object")
    dv = obj.get("dataVersion")
    return ConsumerOffsets(
        offset_table=offsets,
        data_version=None if dv is None else DataVersion.from_json_obj(dv, file=file),
        group_topic_map=group_topic_map,
        lmq_offset_table=None if lmq is None else dict(lmq),
    )


def _derive_group_topic_map(keys: Iterable[str]) -> dict[str, list[str]]:
    # ConsumerOffsetManager#getGroupTopicMap: only keys that split into exactly two parts;
    # HashMap<String, Set<String>>(128) of HashSet(8): both iterate in hash-bucket order.
    groups: dict[str, list[str]] = {}
    for key in keys:
        parts = key.split(TOPIC_GROUP_SEPARATOR)
        if len(parts) == 2:
            topics = groups.setdefault(parts[1], [])
            if parts[0] not in topics:
                topics.append(parts[0])
    result: dict[str, list[str]] = {}
    for g in hashmap_order(groups, 128):
        result[g] = hashmap_order(groups[g], 8)
    return result


def build_consumer_offset(offsets: ConsumerOffsets, *, derive_group_topic_map: bool = False) -> str:
    """``consumerOffset.json`` text in the broker's shape.

    Fields present are those set on ``offsets`` (``None`` = absent, as in 4.x files). With
    ``derive_group_topic_map`` the ``groupTopicMap`` is computed like the broker's getter.
    The offsetTable is written in the given key order (use :func:`chm_order` with
    :data:`CONSUMER_OFFSET_TABLE_CAPACITY` for a fresh table); queue ids ascending.
    """
    obj: dict[str, Any] = {}
    if offsets.data_version is not None:
        obj["dataVersion"] = offsets.data_version.to_json_obj()
    gtm: Mapping[str, Sequence[str]] | None = offsets.group_topic_map
    if derive_group_topic_map:
        gtm = _derive_group_topic_map(offsets.offset_table)
    if gtm is not None:
        obj["groupTopicMap"] = {g: java_set(ts) for g, ts in gtm.items()}
    if offsets.lmq_offset_table is not None:
        obj["lmqOffsetTable"] = dict(offsets.lmq_offset_table)
    obj["offsetTable"] = {
        key: {int(q): int(qmap[q]) for q in sorted(qmap)}
        for key, qmap in offsets.offset_table.items()
    }
    return dumps_fastjson(obj, pretty=True)


# topics.json ---------------------------------------------------------------------------------

_TOPIC_FIELDS = {
    "attributes": "attributes",
    "order": "order",
    "perm": "perm",
    "readQueueNums": "read_queue_nums",
    "topicFilterType": "topic_filter_type",
    "topicName": "topic_name",
    "topicSysFlag": "topic_sys_flag",
    "writeQueueNums": "write_queue_nums",
}


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """``org.apache.rocketmq.common.TopicConfig`` as serialized in ``topics.json``.

    ``perm``: PermName bits (2 write, 4 read, 1 inherit). ``attributes`` (5.x; ``None`` = field
    absent, 4.x) e.g. ``{"+message.type": "NORMAL"}``. ``extra``: any other serialized fields.
    """

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = 6
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: Mapping[str, str] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json_obj(self) -> dict[str, Any]:
        """Bean fields, alphabetically sorted as fastjson writes them."""
        obj: dict[str, Any] = dict(self.extra)
        for json_name, attr in _TOPIC_FIELDS.items():
            value = getattr(self, attr)
            if value is not None:
                obj[json_name] = dict(value) if json_name == "attributes" else value
        return {k: obj[k] for k in sorted(obj)}

    @classmethod
    def from_json_obj(cls, obj: Any, *, file: str | None = None) -> TopicConfig:
        """Read one ``topicConfigTable`` value."""
        if not isinstance(obj, Mapping) or not isinstance(obj.get("topicName"), str):
            raise FormatError(
                file, None, f"TopicConfig: expected an object with topicName: {obj!r}"
            )
        kwargs: dict[str, Any] = {}
        for json_name, attr in _TOPIC_FIELDS.items():
            if json_name in obj:
                kwargs[attr] = obj[json_name]
        if "attributes" in kwargs and not isinstance(kwargs["attributes"], Mapping):
            raise FormatError(file, None, "TopicConfig.attributes: expected an object")
        for name in ("read_queue_nums", "write_queue_nums", "perm", "topic_sys_flag"):
            if name in kwargs and not _is_int(kwargs[name]):
                raise FormatError(file, None, f"TopicConfig.{name}: expected int")
        extra = {k: v for k, v in obj.items() if k not in _TOPIC_FIELDS}
        return cls(**kwargs, extra=extra)


@dataclass(frozen=True, slots=True)
class TopicConfigs:
    """``topics.json`` (``TopicConfigSerializeWrapper``): topic name -> :class:`TopicConfig`."""

    topic_config_table: Mapping[str, TopicConfig]
    data_version: DataVersion | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def parse_topics(text: str, *, file: str | None = None) -> TopicConfigs:
    """Parse ``topics.json`` text."""
    obj = _load_object(text, file, "topics.json")
    table = obj.get("topicConfigTable", {})
    if not isinstance(table, Mapping):
        raise FormatError(file, None, "topicConfigTable: expected an object")
    dv = obj.get("dataVersion")
    return TopicConfigs(
        topic_config_table={
            str(k): TopicConfig.from_json_obj(v, file=file) for k, v in table.items()
        },
        data_version=None if dv is None else DataVersion.from_json_obj(dv, file=file),
        extra={k: v for k, v in obj.items() if k not in ("topicConfigTable", "dataVersion")},
    )


def build_topics(topics: TopicConfigs) -> str:
    """``topics.json`` text; topics in the given order (see :func:`chm_order`)."""
    obj: dict[str, Any] = dict(topics.extra)
    if topics.data_version is not None:
        obj["dataVersion"] = topics.data_version.to_json_obj()
    obj["topicConfigTable"] = {
        name: tc.to_json_obj() for name, tc in topics.topic_config_table.items()
    }
    return dumps_fastjson({k: obj[k] for k in sorted(obj)}, pretty=True)


# subscriptionGroup.json ----------------------------------------------------------------------


def default_subscription_group_fields(group_name: str) -> dict[str, Any]:
    """The fields a 5.x broker writes for a new ``SubscriptionGroupConfig`` (defaults)."""
    return {
        "attributes": {},
        "brokerId": 0,
        "consumeBroadcastEnable": True,
        "consumeEnable": True,
        "consumeFromMinEnable": True,
        "consumeMessageOrderly": False,
        "consumeTimeoutMinute": 15,
        "groupName": group_name,
        "groupRetryPolicy": {"type": "CUSTOMIZED"},
        "groupSysFlag": 0,
        "notifyConsumerIdsChangedEnable": True,
        "retryMaxTimes": DEFAULT_MAX_RECONSUME_TIMES,
        "retryQueueNums": 1,
        "whichBrokerWhenConsumeSlowly": 1,
    }


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    """``SubscriptionGroupConfig`` of ``subscriptionGroup.json``.

    The typed properties cover what tools read; ``fields`` holds every serialized bean field
    (camelCase, as written) so that unknown/newer fields survive a rewrite.
    """

    fields: Mapping[str, Any]

    @property
    def group_name(self) -> str:
        """Consumer group name."""
        return str(self.fields.get("groupName", ""))

    @property
    def consume_enable(self) -> bool:
        """Whether consumption is enabled (default true)."""
        return bool(self.fields.get("consumeEnable", True))

    @property
    def retry_max_times(self) -> int:
        """Reconsume attempts before the DLQ (default 16)."""
        return int(self.fields.get("retryMaxTimes", DEFAULT_MAX_RECONSUME_TIMES))

    @property
    def retry_queue_nums(self) -> int:
        """Number of ``%RETRY%`` queues (default 1)."""
        return int(self.fields.get("retryQueueNums", 1))

    @property
    def consume_broadcast_enable(self) -> bool:
        """Whether broadcast consumption is allowed (default true)."""
        return bool(self.fields.get("consumeBroadcastEnable", True))


@dataclass(frozen=True, slots=True)
class SubscriptionGroups:
    """``subscriptionGroup.json`` (``SubscriptionGroupWrapper`` / ``SubscriptionGroupManager``)."""

    subscription_group_table: Mapping[str, SubscriptionGroupConfig]
    data_version: DataVersion | None = None
    forbidden_table: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def parse_subscription_groups(text: str, *, file: str | None = None) -> SubscriptionGroups:
    """Parse ``subscriptionGroup.json`` text."""
    obj = _load_object(text, file, "subscriptionGroup.json")
    table = obj.get("subscriptionGroupTable", {})
    if not isinstance(table, Mapping):
        raise FormatError(file, None, "subscriptionGroupTable: expected an object")
    groups: dict[str, SubscriptionGroupConfig] = {}
    for name, cfg in table.items():
        if not isinstance(cfg, Mapping) or not isinstance(name, str):
            raise FormatError(file, None, f"subscriptionGroupTable[{name!r}]: expected an object")
        groups[name] = SubscriptionGroupConfig(fields=dict(cfg))
    forbidden = obj.get("forbiddenTable")
    if forbidden is not None and not isinstance(forbidden, Mapping):
        raise FormatError(file, None, "forbiddenTable: expected an object")
    dv = obj.get("dataVersion")
    known = ("subscriptionGroupTable", "dataVersion", "forbiddenTable")
    return SubscriptionGroups(
        subscription_group_table=groups,
        data_version=None if dv is None else DataVersion.from_json_obj(dv, file=file),
        forbidden_table=None if forbidden is None else dict(forbidden),
        extra={k: v for k, v in obj.items() if k not in known},
    )


def build_subscription_groups(groups: SubscriptionGroups) -> str:
    """``subscriptionGroup.json`` text; groups in the given order, bean fields sorted."""
    obj: dict[str, Any] = dict(groups.extra)
    if groups.data_version is not None:
        obj["dataVersion"] = groups.data_version.to_json_obj()
    if groups.forbidden_table is not None:
        obj["forbiddenTable"] = dict(groups.forbidden_table)
    obj["subscriptionGroupTable"] = {
        name: {k: cfg.fields[k] for k in sorted(cfg.fields)}
        for name, cfg in groups.subscription_group_table.items()
    }
    return dumps_fastjson({k: obj[k] for k in sorted(obj)}, pretty=True)
