"""Config texts as RocketMQ's broker decodes them (``ConsumerOffsetManager#decode``, fastjson),
against mqtool's parser of the same text: tests/judge/java/configs, compiled against
rocketmq-broker of each version from Maven Central (tests/realmq.py), in a real JVM."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))
import realmq  # noqa: E402

from mqtool.formats.config import parse_consumer_offset  # noqa: E402
from mqtool.formats.errors import FormatError  # noqa: E402

SOURCES = sorted((Path(__file__).resolve().parent / "java" / "configs").rglob("*.java"))
TEXTS = {
    "unquoted keys (the broker's own)": '{"offsetTable":{"T@g":{0:7,1:9}}}',
    "quoted keys (fastjson's BrowserCompatible)": '{"offsetTable":{"T@g":{"0":7,"1":9}}}',
    "signed quoted keys": '{"offsetTable":{"T@g":{"+2":7,"-1":9}}}',
    "a key that is not an integer": '{"offsetTable":{"T@g":{"x":7}}}',
    "fields a newer broker adds": '{"offsetTable":{"T@g":{0:7}},"newField":[1],'
                                  '"dataVersion":{"counter":3,"timestamp":4,"newer":true}}',
}


def _mqtool(text: str) -> list[str]:
    try:
        co = parse_consumer_offset(text, file="config/consumerOffset.json")
    except FormatError:
        return ["error"]
    return sorted(f"{key} {q} {off}" for key, t in co.offset_table.items() for q, off in t.items())


@pytest.mark.parametrize("version", ["4.9.7", "5.3.3"])
def test_consumer_offsets_decode_as_the_broker_decodes_them(version: str, tmp_path: Path) -> None:
    classes = realmq.compile_java(version, SOURCES, "broker")
    for what, text in TEXTS.items():
        f = tmp_path / "consumerOffset.json"
        f.write_text(text)
        res = realmq.java(version, "mqtool.judge.ConsumerOffsetsLoad", str(f), class_dir=classes,
                          artifacts=("broker",), home=tmp_path / "home", timeout=120)
        assert res.returncode == 0, res.stderr[-2000:]
        broker = [ln if not ln.startswith("error") else "error"
                  for ln in res.stdout.splitlines() if ln.strip()]
        assert _mqtool(text) == broker, (what, broker, res.stderr[-500:])


LOADS = {  # consumerOffset.json, its .bak (None: no .bak)
    "both unreadable": ("garbage", "garbage too"),
    "unreadable, no .bak": ("garbage", None),
    "unreadable, a good .bak": ("garbage", '{"offsetTable":{"T@g":{0:7},"U@g":{0:1}}}'),
    "empty, an unreadable .bak": ("", "garbage"),
    "a newer broker's field": ('{"offsetTable":{"T@g":{0:7}},"newField":1}', None),
}


@pytest.mark.parametrize("version", ["4.9.7", "5.3.3"])
def test_a_start_config_loads_or_stops_the_start_as_the_broker_says(version: str,
                                                                    tmp_path: Path) -> None:
    """ConsumerOffsetManager#load (ConfigManager's .bak fallback) in a BrokerController of each
    version, on the same files mqtool's load_config reads: loaded with as many entries, or
    failed (the broker's start fails with it) where mqtool says the broker does not start."""
    from mqtool.formats.config.load import load_config

    classes = realmq.compile_java(version, SOURCES, "broker")
    for what, (text, bak) in LOADS.items():
        root = tmp_path / what.replace(" ", "-").replace(",", "").replace(".", "")
        (root / "config").mkdir(parents=True)
        (root / "config" / "consumerOffset.json").write_text(text)
        if bak is not None:
            (root / "config" / "consumerOffset.json.bak").write_text(bak)
        res = realmq.java(version, "mqtool.judge.ConfigManagerLoad", str(root),
                          class_dir=classes, artifacts=("broker",), home=tmp_path / "home",
                          timeout=120)
        assert res.returncode == 0, res.stderr[-2000:]
        broker = res.stdout.strip().splitlines()[-1]
        cl = load_config(root, "consumerOffset.json")
        ours = "fails" if cl.unloadable else \
            f"loaded {len(cl.value.offset_table) if cl.value is not None else 0}"
        assert ours == broker, (what, broker, [str(f) for f in cl.findings])
        if cl.unloadable:
            assert any(f.detail.endswith("the broker does not start") for f in cl.findings)
