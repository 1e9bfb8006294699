"""The differential harness: one scripted flow of the official Java client (``Flow.java``) run
against ``mqtool serve`` and against the real RocketMQ broker of the same version, both
started here on 127.0.0.1 over fresh stores, with the same broker settings.

What each client observed (one JSON line per observation) is normalised (what legitimately
differs between two brokers: ids, queue placement, offsets inside the commitlog, timestamps)
and compared; the stores are compared afterwards through mqtool's own read commands. A
difference fails the test with both sides printed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import realmq

from tests.serve.conftest import Served

HERE = Path(__file__).resolve().parent
JAVA = HERE / "java"
JSON_JAVA = realmq.PROGRAMS / "mqtool" / "realmq" / "Json.java"

#: The broker settings both sides run with (the real broker's ``-c`` file; serve's
#: ``--broker-conf``): every delay level 1 s, so retries and delayed messages come quickly.
BROKER_CONF = {
    "messageDelayLevel": " ".join(["1s"] * 18),
    "enablePropertyFilter": "true",
    "transactionTimeOut": "3000",
    "transactionCheckInterval": "2000",
}

#: Properties whose values differ between two brokers by nature (ids, offsets, times): their
#: presence is compared, not their value.
VOLATILE_PROPERTIES = frozenset({
    "UNIQ_KEY", "MIN_OFFSET", "MAX_OFFSET", "CONSUME_START_TIME", "ORIGIN_MESSAGE_ID",
    "PREPARED_TRANSACTION_OFFSET", "TRAN_PREPARED_QUEUE_OFFSET", "REAL_QID",
    "__transactionId__",
})
#: Observation fields that name a place or an instant, not a behaviour.
VOLATILE_FIELDS = frozenset({
    "msgId", "queueId", "queueOffset", "text", "commitLogOffset", "storeTimestamp", "next",
    "min", "max",
})


def classes(version: str) -> Path:
    """Flow.java (and the Json helper) compiled against ``version``'s client."""
    sources = sorted(JAVA.rglob("*.java")) + [JSON_JAVA]
    return realmq.compile_java(version, sources, *realmq.DEFAULT_ARTIFACTS)


def conf_text(conf: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in conf.items())


class Sides:
    """A real name server + broker and a ``mqtool serve`` of one RocketMQ version."""

    def __init__(self, version: str, work: Path, conf: dict[str, str] | None = None) -> None:
        self.version = version
        self.work = work
        self.conf = dict(BROKER_CONF if conf is None else conf)
        self.real = realmq.Cluster(version, work / "real" / "store", broker_conf=self.conf)
        (work / "serve").mkdir(parents=True, exist_ok=True)
        conf_file = work / "serve" / "broker.conf"
        conf_file.write_text(conf_text(self.conf), "utf-8")
        self.serve = Served(work / "serve" / "store", work / "serve" / "serve.log",
                            "--broker-conf", str(conf_file),
                            "--dialect", version)
        self.classes = Path()

    @property
    def namesrv(self) -> dict[str, str]:
        return {"real": self.real.namesrv_addr, "serve": self.serve.namesrv}

    @property
    def stores(self) -> dict[str, Path]:
        return {"real": self.real.store, "serve": self.serve.store}

    def start(self) -> Sides:
        with ThreadPoolExecutor(3) as pool:
            real = pool.submit(self.real.start, 600)
            compiled = pool.submit(classes, self.version)
            self.serve.start()
            real.result()
            self.classes = compiled.result()
        return self

    def stop(self) -> dict[str, int]:
        codes = {}
        try:
            codes["serve"] = self.serve.stop() if self.serve.proc is not None else 0
        finally:
            codes["real"] = self.real.stop()
        return codes

    def kill(self) -> None:
        if self.serve.proc is not None and self.serve.proc.poll() is None:
            self.serve.proc.kill()
            self.serve.proc.wait()
        self.real.kill()

    def flow(self, name: str, prefix: str, timeout: float = 600) -> dict[str, list[dict[str, Any]]]:
        """Run ``Flow <name>`` against both sides at once: each side's observations."""

        def one(side: str) -> list[dict[str, Any]]:
            home = self.work / "clients" / f"{side}-{prefix}"
            res = realmq.java(self.version, "mqtool.realmq.Flow", self.namesrv[side], name,
                              prefix, class_dir=self.classes, timeout=timeout, home=home)
            lines = [json.loads(ln) for ln in res.stdout.splitlines() if ln.startswith("{")]
            if res.returncode != 0:
                raise AssertionError(
                    f"Flow {name} against {side} ({self.version}) exit {res.returncode}:\n"
                    + "\n".join(map(json.dumps, lines)) + "\n" + res.stderr[-4000:])
            return lines

        with ThreadPoolExecutor(2) as pool:
            futs = {side: pool.submit(one, side) for side in ("real", "serve")}
            return {side: f.result() for side, f in futs.items()}


# -- normalising and comparing -------------------------------------------------------------------


def normal(value: Any) -> Any:
    """``value`` without what names a place or an instant (recursively)."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in VOLATILE_FIELDS:
                continue
            if k == "properties" and isinstance(v, dict):
                out[k] = {pk: ("*" if pk in VOLATILE_PROPERTIES else pv) for pk, pv in v.items()}
            else:
                out[k] = normal(v)
        return out
    if isinstance(value, list):
        return [normal(v) for v in value]
    return value


def canonical(obs: Iterable[dict[str, Any]], ordered: Iterable[str] = ()) -> list[str]:
    """The observations as comparable text: normalised, grouped by step; within a step in the
    order they came for the ``ordered`` steps, else sorted (threads, callbacks)."""
    return [c for c, _ in canonical_pairs(obs, ordered)]


def canonical_pairs(obs: Iterable[dict[str, Any]],
                    ordered: Iterable[str] = ()) -> list[tuple[str, dict[str, Any]]]:
    """:func:`canonical`, each line with the observation it came from."""
    keep = set(ordered)
    by_step: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for o in obs:
        by_step.setdefault(o["step"], []).append((json.dumps(normal(o), sort_keys=True), o))
    out: list[tuple[str, dict[str, Any]]] = []
    for step in sorted(by_step):
        pairs = by_step[step]
        out.extend(pairs if step in keep else sorted(pairs, key=lambda p: p[0]))
    return out


def differ(what: str, real: list[str], serve: list[str],
           raw: dict[str, dict[str, dict[str, Any]]] | None = None) -> str:
    """Both sides, the lines only one of them has marked (with what the client said, when
    ``raw`` has it: side -> canonical line -> observation)."""
    only_real = set(real) - set(serve)
    only_serve = set(serve) - set(real)
    text = [f"{what}: mqtool serve differs from the real broker"]
    for side, lines, only, mark in (("real broker", real, only_real, "-"),
                                    ("mqtool serve", serve, only_serve, "+")):
        text.append(f"{mark * 3} {side}")
        for ln in lines:
            text.append((f"{mark} " if ln in only else "  ") + ln)
            said = (raw or {}).get("real" if mark == "-" else "serve", {}).get(ln, {})
            if ln in only and said.get("text"):
                text.append(f"      ({said['text']})")
    return "\n".join(text)


def assert_same(what: str, real: list[str], serve: list[str],
                raw: dict[str, dict[str, dict[str, Any]]] | None = None) -> None:
    if real != serve:
        raise AssertionError(differ(what, real, serve, raw))


def compare_flow(name: str, obs: dict[str, list[dict[str, Any]]],
                 ordered: Iterable[str] = ()) -> None:
    """Fail with both sides printed when the normalised observations differ."""
    pairs = {side: canonical_pairs(obs[side], ordered) for side in ("real", "serve")}
    raw = {side: {c: o for c, o in p} for side, p in pairs.items()}
    assert_same(f"flow {name}", [c for c, _ in pairs["real"]], [c for c, _ in pairs["serve"]],
                raw)


# -- the stores, through mqtool's own read commands ----------------------------------------------


def mqtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mqtool", *map(str, args)],
                          capture_output=True, text=True, timeout=600)


def mqtool_json(*args: str | Path) -> Any:
    res = mqtool(*args, "--json")
    if res.returncode not in (0, 1) or not res.stdout.strip():
        raise AssertionError(f"mqtool {' '.join(map(str, args))} exit {res.returncode}:\n"
                             f"{res.stdout[-2000:]}{res.stderr[-4000:]}")
    return json.loads(res.stdout)


def topics_view(store: Path, prefix: str = "") -> list[str]:
    """Every topic (by ``inspect``): its kind and how many messages its queues hold."""
    doc = mqtool_json("inspect", store)
    return sorted(json.dumps([t["topic"], t["kind"], t["messages"]])
                  for t in doc["topics"] if t["topic"].replace("%RETRY%", "").replace(
                      "%DLQ%", "").startswith(prefix))


def dlq_view(store: Path, prefix: str = "") -> list[str]:
    """Every %DLQ% group (by ``dlq list``): its record count and original topics."""
    doc = mqtool_json("dlq", "list", store)
    rows = doc if isinstance(doc, list) else doc.get("groups", doc.get("dlqs", []))
    out = []
    for g in rows:
        name = g.get("group") or g.get("topic")
        if prefix and not str(name).replace("%DLQ%", "").startswith(prefix):
            continue
        out.append(json.dumps({k: g[k] for k in sorted(g) if k in (
            "group", "topic", "records", "count", "originalTopics", "topics")}, sort_keys=True))
    return sorted(out)


def trace_view(store: Path, key: str, *, once: bool = False) -> list[str]:
    """The journeys of the messages with business key ``key`` (by ``trace --key``): each
    one's kind of verdict and its hops (kind, topic, state), without times and ids; ``once``:
    a hop repeated right after itself counted once (a half message put back at each check,
    how many checks a busy machine makes being timing)."""
    doc = mqtool_json("trace", store, "--key", key)
    out = []
    for t in doc.get("traces", []):
        hops = [[h.get("kind"), h.get("topic"), h.get("state")] for h in t.get("hops", [])]
        if once:
            hops = [h for i, h in enumerate(hops) if i == 0 or h != hops[i - 1]]
        out.append(json.dumps({"verdict": t.get("verdictKind"), "hops": hops}, sort_keys=True))
    return sorted(out)


def copy_store(store: Path, to: Path) -> Path:
    shutil.copytree(store, to, ignore=shutil.ignore_patterns("lock"))
    return to
