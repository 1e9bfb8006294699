"""Which messages a subscription selects, as RocketMQ's broker decides it: a TAG expression
(``TagA || TagB``, ``*``) by the message's tag, a SQL92 one (``MessageSelector.bySql``) over its
properties.

SQL92 is parsed and evaluated as the broker does it:
Follows ``org.apache.rocketmq.filter`` of 4.9.7 and 5.3.3 (``SelectorParser.jj``, taken from
ActiveMQ's selector grammar without LIKE, arithmetic or hex/octal literals; 5.3.3 adds
``CONTAINS``, ``STARTSWITH``, ``ENDSWITH`` and their ``NOT`` forms). A message matches when the
expression evaluates to TRUE over its properties, every value a string
(``MessageEvaluationContext``); NULL (an unknown) and an evaluation error are no match
(``ExpressionMessageFilter#isMatchedByCommitLog``).

Java's types are kept where they decide a result: integer literals are ``Integer`` or ``Long``,
decimals ``Double``; a comparison of a property (a string) with a number converts the string
with ``Integer.valueOf``/``Long.valueOf``/``Double.valueOf`` and fails the evaluation when it
does not parse (the parser sets ``CONVERT_STRING_EXPRESSIONS``); ``>``/``<`` between two strings
compares them as doubles or fails.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Union

__all__ = ["EXPRESSION_SQL92", "EXPRESSION_TAG", "MessageFilter", "SqlFilterError",
           "compile_sql", "is_tag_type", "message_filter", "sql_matches"]

EXPRESSION_TAG = "TAG"  # ExpressionType.TAG
EXPRESSION_SQL92 = "SQL92"  # ExpressionType.SQL92


class SqlFilterError(ValueError):
    """An expression the broker's parser refuses (``MQFilterException``)."""


class _EvalError(Exception):
    """An evaluation that throws in Java (a number that does not parse, a bad cast)."""


@dataclass(frozen=True, slots=True)
class JInt:
    """A Java ``Integer`` (literals that fit 32 bits)."""

    v: int


@dataclass(frozen=True, slots=True)
class JLong:
    """A Java ``Long``."""

    v: int


@dataclass(frozen=True, slots=True)
class JDouble:
    """A Java ``Double``."""

    v: float


Value = Union[str, bool, JInt, JLong, JDouble, None]  # noqa: UP007 (a runtime alias)
Props = Mapping[str, str]
Expr = Callable[[Props], Value]

_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_JAVA_INT = re.compile(r"[+-]?[0-9]+\Z")
_JAVA_DOUBLE = re.compile(
    r"[+-]?(NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)\Z")


# -- Java's conversions -----------------------------------------------------------------------

def _parse_int(s: str, lo: int, hi: int) -> int:
    """``Integer.valueOf``/``Long.valueOf``: NumberFormatException is an evaluation error."""
    if not _JAVA_INT.match(s):
        raise _EvalError(f"not a number: {s!r}")
    n = int(s)
    if not lo <= n <= hi:
        raise _EvalError(f"out of range: {s!r}")
    return n


def _parse_double(s: str) -> float:
    """``Double.valueOf``: surrounding blanks (chars <= space) allowed, a d/f suffix too."""
    t = s.strip("".join(chr(c) for c in range(33)))
    m = _JAVA_DOUBLE.match(t)
    if not m:
        raise _EvalError(f"not a number: {s!r}")
    body = t.rstrip("fFdD") if m.group(1) not in ("NaN", "Infinity") else t
    return float(body.replace("Infinity", "inf"))


def _num(v: Value) -> float | int | None:
    return v.v if isinstance(v, JInt | JLong | JDouble) else None


def _cmp(a: float, b: float) -> int:
    """``Integer/Long/Double.compareTo`` (NaN above everything and equal to itself)."""
    if a != a or b != b:  # NaN
        return 0 if (a != a and b != b) else (1 if a != a else -1)
    return (a > b) - (a < b)


def _compare(lv: Value, rv: Value) -> int:
    """``ComparisonExpression.__compare`` with string conversion on."""
    if type(lv) is type(rv):
        if isinstance(lv, str) and isinstance(rv, str):
            return (lv > rv) - (lv < rv)  # String.compareTo: UTF-16 order (BMP alike)
        if isinstance(lv, bool) and isinstance(rv, bool):
            return int(lv) - int(rv)
        a, b = _num(lv), _num(rv)
        assert a is not None and b is not None
        return _cmp(a, b)
    if isinstance(lv, bool):
        if isinstance(rv, str):  # (String) of a Boolean: ClassCastException
            raise _EvalError("Boolean compared with a string")
        return -1
    if isinstance(lv, str):
        if isinstance(rv, bool):
            return _compare(lv.lower() == "true", rv)  # Boolean.valueOf
        if isinstance(rv, JInt):
            return _cmp(_parse_int(lv, _INT_MIN, _INT_MAX), rv.v)
        if isinstance(rv, JLong):
            return _cmp(_parse_int(lv, _LONG_MIN, _LONG_MAX), rv.v)
        if isinstance(rv, JDouble):
            return _cmp(_parse_double(lv), rv.v)
        return -1
    a = _num(lv)
    if a is None:
        return -1
    if isinstance(rv, str):  # a number on the left: the string becomes the number's type
        if isinstance(lv, JInt):
            return _cmp(a, _parse_int(rv, _INT_MIN, _INT_MAX))
        if isinstance(lv, JLong):
            return _cmp(a, _parse_int(rv, _LONG_MIN, _LONG_MAX))
        return _cmp(a, _parse_double(rv))
    b = _num(rv)
    if b is None:
        return -1
    return _cmp(float(a), float(b)) if isinstance(lv, JDouble) or isinstance(rv, JDouble) \
        else _cmp(a, b)


# -- expression nodes -------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Node:
    """A parsed expression: how it evaluates and what the parser's checks need of it."""

    run: Expr
    boolean: bool = False  # a BooleanExpression
    const: bool = False  # a ConstantExpression (its value in ``value``)
    value: Value = None
    prop: str | None = None  # a PropertyExpression


def _const(v: Value, boolean: bool = False) -> _Node:
    return _Node(lambda _p: v, boolean=boolean, const=True, value=v)


def _as_bool(n: _Node) -> _Node:
    if n.boolean:
        return n
    if n.prop is not None:  # BooleanCast: a property is TRUE only if it is a Boolean (never)
        run = n.run
        return _Node(lambda p: None if run(p) is None else False, boolean=True)
    raise SqlFilterError("Expression will not result in a boolean value")


def _logic(a: _Node, b: _Node, decides: bool) -> _Node:
    """AND (``decides`` False) or OR (True) in three-valued logic (``LogicExpression``): the
    value that decides, else NULL if either side is NULL, else the other value."""
    la, lb = _as_bool(a).run, _as_bool(b).run

    def run(p: Props) -> Value:
        lv = la(p)
        if lv is decides:
            return decides
        rv = lb(p)
        if rv is decides:
            return decides
        return None if lv is None or rv is None else not decides
    return _Node(run, boolean=True)


def _and(a: _Node, b: _Node) -> _Node:
    return _logic(a, b, False)


def _or(a: _Node, b: _Node) -> _Node:
    return _logic(a, b, True)


def _not(a: _Node) -> _Node:
    inner = _as_bool(a).run

    def run(p: Props) -> Value:
        v = inner(p)
        return None if v is None else not v
    return _Node(run, boolean=True)


def _equal_raw(a: _Node, b: _Node) -> _Node:
    la, lb = a.run, b.run

    def run(p: Props) -> Value:
        lv, rv = la(p), lb(p)
        if (lv is None) != (rv is None):
            return None if lv is None else False
        if lv is None or lv == rv and type(lv) is type(rv):
            return True
        return _compare(lv, rv) == 0
    return _Node(run, boolean=True)


def _equal(a: _Node, b: _Node) -> _Node:
    for n in (a, b):
        if n.const and n.value is None:
            raise SqlFilterError("'NULL' cannot be compared.")
    if a.const and b.const and a.boolean and not b.boolean:
        raise SqlFilterError("a boolean cannot be compared with a non-boolean")
    return _equal_raw(a, b)


def _order(a: _Node, b: _Node, test: Callable[[int], bool]) -> _Node:
    for n in (a, b):
        if (n.const and _num(n.value) is None) or (n.boolean and not n.const):
            raise SqlFilterError("Value cannot be compared.")
        if n.const and n.boolean:
            raise SqlFilterError("Value cannot be compared.")
    la, lb = a.run, b.run

    def run(p: Props) -> Value:
        lv = la(p)
        if lv is None:
            return None
        rv = lb(p)
        if rv is None:
            return None
        if isinstance(lv, str) and isinstance(rv, str):
            return test(_cmp(_parse_double(lv), _parse_double(rv)))
        return test(_compare(lv, rv))
    return _Node(run, boolean=True)


def _between(v: _Node, lo: _Node, hi: _Node, negate: bool) -> _Node:
    if lo.const and hi.const:
        if lo.value is None or hi.value is None:
            raise SqlFilterError("Illegal values of between, values can not be null!")
        try:
            wrong = _compare(hi.value, lo.value) < 0
        except _EvalError:
            wrong = False
        if wrong:
            raise SqlFilterError("Illegal values of between, left value must less than or "
                                 "equal to right value")
    if negate:
        return _or(_order(v, lo, lambda c: c < 0), _order(v, hi, lambda c: c > 0))
    return _and(_order(v, lo, lambda c: c >= 0), _order(v, hi, lambda c: c <= 0))


def _property(name: str) -> _Node:
    def run(p: Props) -> Value:
        return p.get(name)
    return _Node(run, prop=name)


def _in(v: _Node, items: list[str], negate: bool) -> _Node:
    if v.prop is None:
        raise SqlFilterError("Expected a property for In expression")
    name, allowed = v.prop, frozenset(items)

    def run(p: Props) -> Value:
        x = p.get(name)
        return None if x is None else ((x in allowed) != negate)
    return _Node(run, boolean=True)


def _text(v: _Node, search: str, test: Callable[[str, str], bool], negate: bool) -> _Node:
    inner = v.run

    def run(p: Props) -> Value:
        if not search:
            return False
        x = inner(p)
        if not isinstance(x, str):
            return False
        return test(x, search) != negate
    return _Node(run, boolean=True)


def _negate(v: _Node) -> _Node:
    inner = v.run

    def run(p: Props) -> Value:
        x = inner(p)
        if isinstance(x, JInt):
            return JInt(-x.v if x.v != _INT_MIN else _INT_MIN)
        if isinstance(x, JLong):
            return JLong(-x.v if x.v != _LONG_MIN else _LONG_MIN)
        if isinstance(x, JDouble):
            return JDouble(-x.v)
        return None
    return _Node(run)  # never a constant: BETWEEN and > do not check a negated literal


# -- tokens and grammar -----------------------------------------------------------------------

_KEYWORDS = {"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS"}
_KEYWORDS_5X = _KEYWORDS | {"CONTAINS", "STARTSWITH", "ENDSWITH"}
_TOKEN = re.compile(r"""
    (?P<ws>[ \t\n\r\f]+)
  | (?P<line>--[^\n\r]*(?:\r\n|\n|\r))
  | (?P<block>/\*[^*]*\*+(?:[^*/][^*]*\*+)*/)
  | (?P<float>[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?
              |[0-9]+[eE][+-]?[0-9]+)
  | (?P<dec>0|[1-9][0-9]*[lL]?)
  | (?P<str>'(?:''|[^'])*')
  | (?P<id>[a-zA-Z_$][a-zA-Z0-9_$]*)
  | (?P<op><>|>=|<=|[=<>(),+-])
""", re.VERBOSE)


def _tokens(sql: str, keywords: set[str]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(sql):
        m = _TOKEN.match(sql, pos)
        if m is None:
            raise SqlFilterError(f"Lexical error at column {pos + 1}: {sql[pos]!r}")
        kind, text = m.lastgroup or "", m.group()
        pos = m.end()
        if kind in ("ws", "line", "block"):
            continue
        if kind == "id" and text.upper() in keywords:
            out.append(("kw", text.upper()))
        else:
            out.append((kind, text))
    return out


class _Parser:
    def __init__(self, sql: str, v5: bool) -> None:
        self.toks = _tokens(sql, _KEYWORDS_5X if v5 else _KEYWORDS)
        self.i = 0

    def peek(self, k: int = 0) -> tuple[str, str]:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else ("eof", "")

    def take(self, kind: str, text: str | None = None) -> str:
        t = self.peek()
        if t[0] != kind or (text is not None and t[1] != text):
            raise SqlFilterError(f"Encountered {t[1]!r} at token {self.i + 1}, "
                                 f"expected {text or kind}")
        self.i += 1
        return t[1]

    def at(self, kind: str, text: str, k: int = 0) -> bool:
        return self.peek(k) == (kind, text)

    def selector(self) -> _Node:
        n = self.or_expr()
        if self.peek()[0] != "eof":
            raise SqlFilterError(f"Encountered {self.peek()[1]!r} at token {self.i + 1}")
        return _as_bool(n)

    def or_expr(self) -> _Node:
        left = self.and_expr()
        while self.at("kw", "OR"):
            self.i += 1
            left = _or(left, self.and_expr())
        return left

    def and_expr(self) -> _Node:
        left = self.equality()
        while self.at("kw", "AND"):
            self.i += 1
            left = _and(left, self.equality())
        return left

    def equality(self) -> _Node:
        left = self.comparison()
        while True:
            if self.at("op", "="):
                self.i += 1
                left = _equal(left, self.comparison())
            elif self.at("op", "<>"):
                self.i += 1
                left = _not(_equal(left, self.comparison()))
            elif self.at("kw", "IS") and self.at("kw", "NULL", 1):
                self.i += 2
                left = _equal_raw(left, _const(None, boolean=True))
            elif self.at("kw", "IS"):
                self.i += 1
                self.take("kw", "NOT")
                self.take("kw", "NULL")
                left = _not(_equal_raw(left, _const(None, boolean=True)))
            else:
                return left

    def comparison(self) -> _Node:
        left = self.unary()
        tests: dict[str, Callable[[int], bool]] = {
            ">": lambda c: c > 0, ">=": lambda c: c >= 0,
            "<": lambda c: c < 0, "<=": lambda c: c <= 0}
        texts: dict[str, Callable[[str, str], bool]] = {
            "CONTAINS": lambda x, s: s in x, "STARTSWITH": lambda x, s: x.startswith(s),
            "ENDSWITH": lambda x, s: x.endswith(s)}
        while True:
            kind, text = self.peek()
            negate = kind == "kw" and text == "NOT" and self.peek(1)[0] == "kw" and \
                self.peek(1)[1] in ("BETWEEN", "IN", *texts)
            if negate:
                self.i += 1
                kind, text = self.peek()
            if kind == "op" and text in tests:
                self.i += 1
                left = _order(left, self.unary(), tests[text])
            elif kind == "kw" and text in texts:
                self.i += 1
                left = _text(left, self.string(), texts[text], negate)
            elif kind == "kw" and text == "BETWEEN":
                self.i += 1
                lo = self.unary()
                self.take("kw", "AND")
                left = _between(left, lo, self.unary(), negate)
            elif kind == "kw" and text == "IN":
                self.i += 1
                self.take("op", "(")
                items = [self.string()]
                while self.at("op", ","):
                    self.i += 1
                    items.append(self.string())
                self.take("op", ")")
                left = _in(left, items, negate)
            else:
                return left

    def unary(self) -> _Node:
        if self.at("op", "+"):
            self.i += 1
            return self.unary()
        if self.at("op", "-"):
            self.i += 1
            return _negate(self.unary())
        if self.at("kw", "NOT"):
            self.i += 1
            return _not(self.unary())
        return self.primary()

    def string(self) -> str:
        return self.take("str")[1:-1].replace("''", "'")

    def primary(self) -> _Node:
        kind, text = self.peek()
        if kind == "str":
            return _const(self.string())
        self.i += 1
        if kind == "dec":
            big = int(text.rstrip("lL"))
            if big > _LONG_MAX:
                raise SqlFilterError(f"For input string: {text!r}")
            return _const(JInt(big) if big <= _INT_MAX else JLong(big))
        if kind == "float":
            f = float(text)
            if f == float("inf") or f < 5e-324:  # createFloat: above MAX_VALUE, below MIN_VALUE
                raise SqlFilterError(f"{text} is out of the range of a Double literal")
            return _const(JDouble(f))
        if kind == "kw" and text in ("TRUE", "FALSE", "NULL"):
            return _const({"TRUE": True, "FALSE": False, "NULL": None}[text], boolean=True)
        if kind == "id":
            return _property(text)
        if kind == "op" and text == "(":
            inner = self.or_expr()
            self.take("op", ")")
            return inner
        self.i -= 1
        raise SqlFilterError(f"Encountered {text!r} at token {self.i + 1}")


def compile_sql(sql: str, *, v5: bool) -> Expr:
    """The expression of a SQL92 subscription, as the broker of 4.9.7 (``v5`` False) or 5.3.3
    compiles it; :class:`SqlFilterError` when that broker refuses it."""
    if sql is None or not sql.strip():
        raise SqlFilterError("empty expression")
    return _Parser(sql, v5).selector().run


def sql_matches(expr: Expr, properties: Props) -> bool:
    """Whether a message with ``properties`` is delivered: TRUE only (NULL and an evaluation
    that throws are no match)."""
    try:
        return expr(properties) is True
    except _EvalError:
        return False


def is_tag_type(expression_type: str | None) -> bool:
    """``ExpressionType.isTagType``: no type or ``TAG``."""
    return not expression_type or expression_type == EXPRESSION_TAG


@dataclass(frozen=True, slots=True)
class MessageFilter:
    """What one subscription selects: ``tags`` (None: every tag) for a TAG expression, ``sql``
    for a SQL92 one."""

    tags: frozenset[str] | None = None
    sql: Expr | None = None

    def matches(self, tags: str | None, properties: Props) -> bool:
        if self.sql is not None:
            return sql_matches(self.sql, properties)
        return self.tags is None or (tags or "") in self.tags


@lru_cache(maxsize=128)
def message_filter(expression: str | None, expression_type: str | None, *, v5: bool
                   ) -> MessageFilter:
    """The filter of a subscription (``FilterAPI.build`` and ``ConsumerFilterManager.build``):
    :class:`SqlFilterError` when a SQL92 expression does not compile; any type other than
    TAG and SQL92 selects everything (the broker has no other filter). Compiled once per
    expression, not on every pull (the broker's parser keeps a cache too)."""
    if not is_tag_type(expression_type):
        if expression_type == EXPRESSION_SQL92:
            return MessageFilter(sql=compile_sql(expression or "", v5=v5))
        return MessageFilter()
    expr = (expression or "").strip()
    if expr in ("", "*"):
        return MessageFilter()
    return MessageFilter(tags=frozenset(t.strip() for t in expr.split("||") if t.strip()))
