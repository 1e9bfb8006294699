"""Run RocketMQ's own store code on a store copy: mqtool's judge driver (tests/judge/java: common,
driver for 4.9.7, driver533 for 5.3.3) compiled against RocketMQ's rocketmq-store of that version
from Maven Central (tests/realmq.py), in a real JVM.

The broker code WRITES into the store it opens (abort, lock, checkpoint, config files): the
helpers here always judge a throw-away copy."""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "rocketmq-stores"
JAVA = Path(__file__).resolve().parent / "java"
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))
import realmq  # noqa: E402

# the seeded damage and the mqtool runner of tests/integrity (one home), importable from here
# whether or not pytest collected tests/integrity first
if str(ROOT / "tests" / "integrity") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests" / "integrity"))
damage = importlib.import_module("integrity_damage")
# the store code's own JVM flags; 5.x's store code logs through its relocated logback, to stderr
# here (stdout carries the report)
JVM_FLAGS = (*realmq.JVM_FLAGS, f"-Drmq.logback.configurationFile={JAVA / 'logback-stderr.xml'}")
DRIVERS = {"4.9.7": "driver", "5.3.3": "driver533"}


def classes(version: str = "4.9.7") -> Path:
    """The judge's class directory for ``version`` (compiled once, cached under build/)."""
    sources = sorted((JAVA / "common").rglob("*.java")) + \
        sorted((JAVA / DRIVERS[version]).rglob("*.java"))
    return realmq.compile_java(version, sources, "store")


def classpath(version: str = "4.9.7") -> str:
    """The judge's classes and RocketMQ ``version``'s rocketmq-store with what it depends on."""
    return f"{classes(version)}:{realmq.classpath(version, 'store')}"


def judge(store: Path, *args: str | Path, version: str = "4.9.7",
          timeout: int = 300) -> tuple[int, dict[str, Any], str]:
    """RocketMQ ``version`` loads ``store`` (a copy the caller owns): exit code, JSON report,
    stderr."""
    res = subprocess.run(
        ["java", *JVM_FLAGS, "-cp", classpath(version), "mqtool.judge.Judge", "--store", str(store),
         *map(str, args)],
        capture_output=True, text=True, timeout=timeout,
    )
    doc: dict[str, Any] = json.loads(res.stdout) if res.stdout.strip() else {}
    return res.returncode, doc, res.stderr


def judge_copy(src: Path, work: Path, *args: str | Path,
               version: str = "4.9.7") -> tuple[int, dict[str, Any], str]:
    """Copy ``src`` to a fresh directory under ``work`` and judge the copy."""
    n = 0
    while (work / f"judged-{n}").exists():
        n += 1
    dst = work / f"judged-{n}"
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        p.chmod(p.stat().st_mode | 0o200)
    return judge(dst, *args, version=version)


def geometry(name: str) -> list[str]:
    """The index geometry of a fixture store (its manifest's storeConfig) as judge options."""
    conf = json.loads((FIXTURES / name / "manifest" / "summary.json").read_text("utf-8"))
    conf = conf["storeConfig"]
    return ["--hash-slots", str(conf["maxHashSlotNum"]), "--index-num", str(conf["maxIndexNum"])]


def keys_file(name: str, dst: Path) -> Path:
    """The ``topic#key`` list of a fixture's manifest (every UNIQ_KEY and KEYS token), as the
    TOPIC<TAB>KEY lines the judge's --keys reads."""
    lines = []
    text = (FIXTURES / name / "manifest" / "index_queries.jsonl").read_text("utf-8")
    for line in text.splitlines():
        if line.strip():
            q = json.loads(line)
            lines.append(f"{q['topic']}\t{q['key']}\n")
    dst.write_text("".join(lines), "utf-8")
    return dst


def problems(doc: dict[str, Any]) -> list[str]:
    return [f"{p['kind']} {p['file']} @ {p['offset']}: {p['detail']}" for p in doc["problems"]]


def queue_max(doc: dict[str, Any]) -> dict[str, int]:
    """Each queue's max offset after RocketMQ's recovery (before start)."""
    return {k: q["max"] for k, q in doc["afterLoad"]["consumeQueues"].items()}

