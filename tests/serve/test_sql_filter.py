"""SQL92 subscriptions as RocketMQ's broker parses and evaluates them (its filter module of
4.9.7 and 5.3.3). The real brokers judge the same rules end to end in
tests/serve/differential (``filter`` and ``filter5`` flows); this table pins the corners."""

from __future__ import annotations

import pytest

from mqtool.serve.subscription import SqlFilterError, compile_sql, message_filter, sql_matches

PROPS = {"a": "10", "b": "x4", "s": "abc", "f": "1.5", "t": "TRUE", "n": "-3"}


@pytest.mark.parametrize("sql,want", [
    ("a > 5", True),  # a string property against an integer: Integer.valueOf
    ("a >= 10 AND a <= 10", True),
    ("a BETWEEN 1 AND 9", False),
    ("a NOT BETWEEN 1 AND 9", True),
    ("a = 10", True),
    ("a = '10'", True),
    ("a <> 10", False),
    ("f > 1", False),  # Integer.valueOf("1.5") fails: the evaluation throws, no match
    ("f > 1.0", True),  # Double.valueOf
    ("b > 1", False),  # "x4" is no number
    ("NOT (b > 1)", False),  # an evaluation error is no match, negated or not
    ("b = 'x4' OR b > 1", True),  # OR stops at the first TRUE
    ("b > 1 OR b = 'x4'", False),  # ... and the error comes first here
    ("s IN ('abc', 'd')", True),
    ("s NOT IN ('abc')", False),
    ("missing IN ('abc')", False),  # NULL
    ("missing IS NULL", True),
    ("s IS NOT NULL", True),
    ("missing = 'x'", False),
    ("NOT missing = 'x'", False),  # NOT binds first: NOT (missing) = 'x'
    ("NOT (missing = 'x')", False),  # NOT NULL is NULL
    ("t = TRUE", True),  # Boolean.valueOf
    ("n = -3", True),
    ("n < -2.5", True),
    ("a > n", True),  # two strings under > are compared as doubles
    ("s", False),  # a property alone is never a Boolean
    ("TRUE", True),
    ("a > 5 AND missing = 1", False),  # NULL AND TRUE is NULL
    ("a > 5 OR missing = 1", True),
    ("a = 10 -- a comment\n", True),
    ("a /* one */ = 10", True),
])
def test_evaluation(sql: str, want: bool) -> None:
    for v5 in (False, True):
        assert sql_matches(compile_sql(sql, v5=v5), PROPS) is want, (sql, v5)


@pytest.mark.parametrize("sql", [
    "a = NULL", "a > 'x'", "a > TRUE", "5", "a BETWEEN 9 AND 1", "a IN (1)", "a != 1",
    "0.0 = a", "a = 007", "a = ", "", "a LIKE 'x'", "(a = 1", "a = 1)", "a = 9223372036854775808",
    "a = 1 -- no newline",
])
def test_refused(sql: str) -> None:
    for v5 in (False, True):
        with pytest.raises(SqlFilterError):
            compile_sql(sql, v5=v5)


def test_5x_words_are_names_in_4x() -> None:
    props = {"b": "x4", "contains": "1"}
    assert sql_matches(compile_sql("b CONTAINS '4'", v5=True), props)
    assert sql_matches(compile_sql("b NOT STARTSWITH 'y' AND b ENDSWITH '4'", v5=True), props)
    assert not sql_matches(compile_sql("missing NOT CONTAINS 'x'", v5=True), props)
    assert sql_matches(compile_sql("contains = 1", v5=False), props)  # a property in 4.9.7
    with pytest.raises(SqlFilterError):
        compile_sql("b CONTAINS '4'", v5=False)
    with pytest.raises(SqlFilterError):
        compile_sql("contains = 1", v5=True)


def test_tag_expressions() -> None:
    f = message_filter("TagA || TagC", "TAG", v5=False)
    assert f.matches("TagA", {}) and not f.matches("TagB", {}) and not f.matches(None, {})
    assert message_filter("*", None, v5=False).matches(None, {})
    sql = message_filter("a > 5", "SQL92", v5=False)
    assert sql.matches(None, {"a": "6"}) and not sql.matches("TagA", {"a": "5"})
