"""The fastjson 1.x dialect of the broker config JSON files (``store/config/*.json``).

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

This module is pure: no file IO (loading with the ``.bak`` fallback is :mod:`.load`; writing
``<file>.bak`` then the file is the store engine's job).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mqtool.formats.errors import FormatError

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
    from decimal import Decimal  # (the writers only: slow to import for every read)

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
