"""bench/figures.py: the one way benchmark figures reach the README.

Every benchmark ``bench/<name>/`` writes ``bench/<name>/last-run.json``. This script renders each
result file as a Markdown block and copies it into README.md between the markers

    <!-- bench:<name>:start -->
    ...
    <!-- bench:<name>:end -->

so that every figure in the README can be traced to a result file the current code wrote. A
benchmark with a result file but no markers yet gets its block appended before
``<!-- bench:blocks:end -->``. ``--check`` changes nothing and exits 1 when the README differs
from what this script would write (tests/core/test_bench_figures.py runs the same check).

Result-file schema (what :func:`write_last_run` writes; benchmarks use it)::

    {"bench": "<name>", "commit": "<git sha>", "dirty": false, "cpuCount": 2,
     "loadAverage": [1.9, 2.1, 2.3], "cpuCalibrationMs": 52.0, "startedUtc": "...",
     "size": "small" | "full",
     "params": {...}, "baseline": "<what the ratios divide by, measured in the same run>",
     "figures": [{"what": "...", "value": 123.4, "unit": "msgs/s", "ratio": 0.06}, ...],
     "outsideReferences": [{"what": "...", "value": "...", "source": "..."}],
     "notes": ["..."]}

``ratio`` is always against ``baseline`` of the same run. A result file with several baselines
gives ``"baselines": {"<key>": "<what>", ...}`` instead, and each figure ``"ratios": {"<key>":
<ratio>, ...}``: a ratio column per baseline. A number not measured in the run goes
into ``outsideReferences`` with its source and is never a ratio. Older result files without
``figures`` (bench/scan's) are rendered from their ``rates`` list; fields they lack are shown as
"not recorded".

Usage: .venv/bin/python bench/figures.py [--check] [--readme README.md]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
README = REPO / "README.md"
BLOCKS_END = "<!-- bench:blocks:end -->"
NOT_RECORDED = "not recorded"


# --- writing a result file (used by the benchmarks) -------------------------------------------
CALIBRATION_LOOP = 2_000_000
"""Iterations of :func:`cpu_calibration`'s loop."""


def cpu_calibration() -> float:
    """Milliseconds this Python takes for a fixed loop (median of three): how fast the machine
    was when a bench ran, so that runs made at different times can be compared (a shared
    machine's speed changes from hour to hour). Not a figure of mqtool's."""
    times = []
    for _ in range(3):
        t = time.perf_counter()
        total = 0
        for i in range(CALIBRATION_LOOP):
            total += i
        times.append(time.perf_counter() - t)
    return round(sorted(times)[1] * 1000, 1)


def run_meta() -> dict[str, Any]:
    """Commit, whether the tree had uncommitted changes, cores, load average, the machine's
    speed (:func:`cpu_calibration`), start time."""

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                                  check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return ""

    return {
        "commit": git("rev-parse", "HEAD") or NOT_RECORDED,
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no", "--", "mqtool",
                          "formats", "spark", "bench", ":(exclude)bench/*/last-run.json")),
        "cpuCount": os.cpu_count(),
        "loadAverage": [round(x, 2) for x in os.getloadavg()],
        "cpuCalibrationMs": cpu_calibration(),
        "startedUtc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def write_last_run(name: str, meta: dict[str, Any], doc: dict[str, Any]) -> Path:
    """Write ``bench/<name>/last-run.json`` = meta (taken at the start) + the run's document."""
    out = {"bench": name, **meta, **doc}
    out["loadAverageAtEnd"] = [round(x, 2) for x in os.getloadavg()]
    out["cpuCalibrationMsAtEnd"] = cpu_calibration()
    path = BENCH / name / "last-run.json"
    path.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path.relative_to(REPO)}", file=sys.stderr)
    return path


# --- rendering ----------------------------------------------------------------------------------
def _num(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    if isinstance(v, int) or abs(v) >= 100:
        return f"{round(v):,}"
    if abs(v) >= 1:
        return f"{v:.2f}".rstrip("0").rstrip(".")
    return f"{v:.4g}"


def _meta_line(doc: dict[str, Any]) -> str:
    if "commit" not in doc:
        return ("This result file records no commit, core count or load average (it predates "
                "bench/figures.py's schema), so the code that produced it is not known.")
    commit = doc["commit"]
    short = commit[:10] if commit != NOT_RECORDED else commit
    dirty = " (with uncommitted changes)" if doc.get("dirty") else ""
    cores = doc.get("cpuCount", NOT_RECORDED)
    load = doc.get("loadAverage")
    load_s = " / ".join(_num(x) for x in load) if load else NOT_RECORDED
    when = doc.get("startedUtc", NOT_RECORDED)
    size = doc.get("size")
    size_s = f", size {size}" if size else ""
    calib = doc.get("cpuCalibrationMs")
    calib_s = (f" A loop of {CALIBRATION_LOOP:,} Python additions took {_num(calib)} ms at the "
               f"start and {_num(doc.get('cpuCalibrationMsAtEnd', NOT_RECORDED))} ms at the end "
               "(the machine's speed, to compare runs made at different times)."
               if calib is not None else "")
    return (f"Last run: commit `{short}`{dirty}, {cores} cores, load average {load_s} "
            f"(1/5/15 min) at the start, {when}{size_s}.{calib_s}")


def _rows(doc: dict[str, Any]) -> tuple[str | None, list[tuple[str, str, str]]]:
    if "figures" in doc:
        rows = []
        for f in doc["figures"]:
            value = f"{_num(f['value'])} {f.get('unit', '')}".rstrip()
            ratio = _num(f["ratio"]) if f.get("ratio") is not None else ""
            rows.append((str(f["what"]), value, ratio))
        return doc.get("baseline"), rows
    rates = doc.get("rates") or []
    rows = [(str(r.get("what")), f"{_num(r.get('msgsPerSecond'))} msgs/s",
             _num(r["ofSequentialRead"]) if "ofSequentialRead" in r else "") for r in rates]
    return ("sequential read (warm), same run" if rates else None), rows


def _rows_by_baseline(doc: dict[str, Any]) -> list[str]:
    """The table of a result file with several baselines (a ratio column each)."""
    keys = list(doc["baselines"])
    head = "| what | measured | " + " | ".join(f"ratio to {doc['baselines'][k]}" for k in keys)
    lines = [head + " |", "|---|---|" + "---|" * len(keys)]
    for f in doc["figures"]:
        value = ("-" if f["value"] is None
                 else f"{_num(f['value'])} {f.get('unit', '')}".rstrip())
        ratios = f.get("ratios") or {}
        cells = [_num(ratios[k]) if ratios.get(k) is not None else "" for k in keys]
        lines.append(f"| {f['what']} | {value} | " + " | ".join(cells) + " |")
    return lines


def render(name: str, doc: dict[str, Any]) -> str:
    """The Markdown block of one result file (without the markers)."""
    lines = [f"Figures from `bench/{name}/last-run.json`. {_meta_line(doc)}", ""]
    baseline, rows = _rows(doc)
    if doc.get("baselines") and doc.get("figures"):
        lines += _rows_by_baseline(doc)
    elif rows:
        ratio_head = f"ratio to {baseline}" if baseline else "ratio"
        lines += [f"| what | measured | {ratio_head} |", "|---|---|---|"]
        lines += [f"| {w} | {v} | {r} |" for w, v, r in rows]
    else:
        lines.append("(this result file holds no figures)")
    refs = doc.get("outsideReferences") or []
    if refs:
        lines.append("")
        lines.append("Outside references (not measured in this run, not ratios):")
        lines += [f"- {r['what']}: {r['value']} (source: {r['source']})" for r in refs]
    for note in doc.get("notes") or []:
        lines += ["", str(note)]
    return "\n".join(lines)


def result_files() -> dict[str, Path]:
    return {p.parent.name: p for p in sorted(BENCH.glob("*/last-run.json"))}


def markers(name: str) -> tuple[str, str]:
    return f"<!-- bench:{name}:start -->", f"<!-- bench:{name}:end -->"


def rendered_readme(text: str) -> str:
    """README text with every bench block replaced by the rendering of its result file."""
    for name, path in result_files().items():
        block = render(name, json.loads(path.read_text(encoding="utf-8")))
        start, end = markers(name)
        if start in text:
            pat = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
            new = f"{start}\n{block}\n{end}"
            text = pat.sub(lambda _m, new=new: new, text, count=1)  # type: ignore[misc]
        elif BLOCKS_END in text:
            text = text.replace(BLOCKS_END, f"### bench/{name}\n\n{start}\n{block}\n{end}\n\n"
                                f"{BLOCKS_END}", 1)
        else:
            raise SystemExit(f"README has neither {start} nor {BLOCKS_END}")
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    ap.add_argument("--readme", type=Path, default=README)
    args = ap.parse_args()
    text = args.readme.read_text(encoding="utf-8")
    new = rendered_readme(text)
    if args.check:
        if new != text:
            print(f"{args.readme}: benchmark figures differ from bench/*/last-run.json; run "
                  "`.venv/bin/python bench/figures.py`", file=sys.stderr)
            return 1
        return 0
    if new != text:
        args.readme.write_text(new, encoding="utf-8")
        print(f"updated {args.readme}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
