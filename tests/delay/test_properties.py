"""broker.conf as ``java.util.Properties#load`` reads it, and ``messageDelayLevel`` as
``ScheduleMessageService#parseDelayLevel`` splits it."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqtool.formats.config.properties import load_properties, parse_properties
from mqtool.formats.errors import BadConfigError
from mqtool.formats.rules import (
    BrokerRuleError,
    java_split_space,
    level_string,
    parse_delay_levels,
)


def test_comments_separators_and_white_space() -> None:
    text = (
        "# a comment\n"
        "   ! another comment\n"
        "\n"
        "brokerName = broker-a  \n"  # value keeps its trailing white space
        "brokerId:0\n"
        "deleteWhen\t04\n"  # white space alone separates too
        "\fnamesrvAddr =: x\n"  # one separator only: the second one is part of the value
        "flag\n"  # a key without a value
        "a=1\n"
        "a=2\n"  # the last one wins
    )
    p = parse_properties(text)
    assert p == {
        "brokerName": "broker-a  ", "brokerId": "0", "deleteWhen": "04", "namesrvAddr": ": x",
        "flag": "", "a": "2",
    }


def test_continuations_and_line_ends() -> None:
    text = (
        "messageDelayLevel=1s 5s \\\r\n"
        "      10s \\\n"
        "\t30s\r"
        "# a comment after a continuation line is a comment again\n"
        "k=v\\\n"
        "# not a comment: this continues k\n"
        "even=ends with two backslashes \\\\\n"
        "next=1\n"
    )
    p = parse_properties(text)
    assert p["messageDelayLevel"] == "1s 5s 10s 30s"
    assert p["k"] == "v# not a comment: this continues k"
    assert p["even"] == "ends with two backslashes \\"
    assert p["next"] == "1"


def test_escapes_in_keys_and_values() -> None:
    p = parse_properties("my\\ key\\=x\\:y = tab\\there\\u0041\\q\\\\\n")
    assert p == {"my key=x:y": "tab\there" + "A" + "q\\"}
    with pytest.raises(BadConfigError, match="malformed"):
        parse_properties("k=\\u00zz\n", file="broker.conf")


def test_bytes_are_iso_8859_1(tmp_path: Path) -> None:
    f = tmp_path / "broker.conf"
    f.write_bytes("brokerName=br\xf6ker\nname=\\u00e9t\\u00e9\n".encode("latin-1"))
    assert load_properties(f) == {"brokerName": "br\xf6ker", "name": "\xe9t\xe9"}
    with pytest.raises(BadConfigError, match="cannot read"):
        load_properties(tmp_path / "missing.conf")


def test_delay_levels_split_like_java() -> None:
    assert java_split_space("1s 5s  ") == ["1s", "5s"]  # trailing empties dropped
    assert java_split_space(" 1s") == ["", "1s"]  # leading ones kept
    assert java_split_space("") == [""]
    assert parse_delay_levels("1s 5s ") == {1: 1000, 2: 5000}  # the broker accepts this
    assert parse_delay_levels("+2s") == {1: 2000}  # Long.parseLong takes a sign
    for bad in (" 1s", "1s  5s", "1_0s", "1 s", "1S"):
        with pytest.raises(BrokerRuleError):
            parse_delay_levels(bad)
    assert level_string({1: 1000, 2: 90_000, 3: 3_600_000}) == "1s 90s 1h"
    with pytest.raises(BrokerRuleError):
        level_string({1: 1000, 3: 2000})


def test_one_home_for_properties_and_delay_evidence() -> None:
    """The properties reader and the delay-level evidence are defined once (each has a home)."""
    import re

    root = Path(__file__).resolve().parents[2]
    homes = {
        "load_properties": "formats/config/properties.py",
        "resolve_delay_levels": "mqtool/delaylevels.py",
        "collect_evidence": "mqtool/delaylevels.py",
        "check_timer": "mqtool/integrity/timer.py",
    }
    rx = re.compile(r"^\s*def _?(" + "|".join(homes) + r")\(", re.M)
    found = []
    for folder in ("formats", "mqtool", "spark"):
        for path in (root / folder).rglob("*.py"):
            rel = str(path.relative_to(root))
            found += [(m.group(1), rel) for m in rx.finditer(path.read_text(encoding="utf-8"))]
    assert sorted(found) == sorted(homes.items())
