"""Every benchmark figure in the README is copied from a committed bench/*/last-run.json.

Not timed: it only compares text. The blocks between ``<!-- bench:<name>:start -->`` and
``<!-- bench:<name>:end -->`` must equal what bench/figures.py renders from the result files, and
every result file carries the commit, core count and load average it ran with.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def _figures() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_figures", REPO / "bench" / "figures.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_readme_figure_blocks_equal_the_result_files() -> None:
    figures = _figures()
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert readme == figures.rendered_readme(readme), (
        "README benchmark figures differ from bench/*/last-run.json: run "
        "`.venv/bin/python bench/figures.py`")


def test_every_result_file_has_a_block_and_every_block_a_result_file() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = set(re.findall(r"<!-- bench:([a-z0-9_-]+):start -->", readme))
    files = {p.parent.name for p in (REPO / "bench").glob("*/last-run.json")}
    assert files <= blocks, files - blocks
    assert blocks <= files, blocks - files


def test_own_benchmarks_record_how_they_ran() -> None:
    """decode, write and trace write the full schema: commit, cores, load, baseline, ratios."""
    for name in ("decode", "write", "trace"):
        doc = json.loads((REPO / "bench" / name / "last-run.json").read_text(encoding="utf-8"))
        assert doc["bench"] == name
        assert re.fullmatch(r"[0-9a-f]{40}", doc["commit"]), name
        assert doc["cpuCount"] >= 1 and len(doc["loadAverage"]) == 3, name
        assert doc["baseline"] and doc["figures"], name
        for f in doc["figures"]:
            assert isinstance(f["value"], int | float) and f.get("ratio") is not None, f


def test_trace_benchmark_times_a_multi_hop_journey() -> None:
    doc = json.loads((REPO / "bench" / "trace" / "last-run.json").read_text(encoding="utf-8"))
    kinds = doc["journey"]["kinds"]
    assert kinds[0] == "original" and kinds[-1] == "dlq", kinds
    assert {"schedule", "retry"} <= set(kinds) and len(kinds) >= 4, kinds
    assert doc["sameAnswer"] is True


#: Benchmarks that run RocketMQ's own Java code in the same run as their baseline: bench/scan
#: (rocketmq-common's MessageDecoder) and bench/broker (the real name server and broker).
JAVA_MEASURED_IN_THE_RUN = {"scan", "broker"}


def test_no_constant_is_presented_as_measured() -> None:
    """Figures quoted from elsewhere are outside references, never a ratio column: a Java
    figure appears only where the benchmark ran the Java code itself, in the same run."""
    for p in (REPO / "bench").glob("*/last-run.json"):
        text = p.read_text(encoding="utf-8")
        assert "target_ratio" not in text, p
        if p.parent.name in JAVA_MEASURED_IN_THE_RUN:
            doc = json.loads(text)
            said = json.dumps(doc.get("baseline", "")) + json.dumps(doc.get("baselines", ""))
            assert "same run" in said, p
            continue
        assert "Java" not in text, p
    for name in ("decode", "write", "trace"):
        src = (REPO / "bench" / name / "run.py").read_text(encoding="utf-8")
        assert "3,000,000" not in src and "180k" not in src and "90_000" not in src, name
