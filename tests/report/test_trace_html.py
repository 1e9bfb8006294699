"""``mqtool trace --html``: the journey page against the real journey store (RocketMQ 4.9.7).

The page's embedded data must equal what ``mqtool trace --json`` prints for the same call, and
headless Chromium must render the page with no console error and no request but the file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from report_browser import assert_self_contained, render, shot_path

from conftest import store_dir
from mqtool.report.page import read_page_data

LEVELS = "1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 10s 1h 2h"

def _mqtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mqtool", *args], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "NO_COLOR": "1"})


def _json_and_page(store: Path, target: list[str], out: Path) -> tuple[Any, str]:
    """The --json document and the --html page of one trace call (one run each)."""
    res = _mqtool("trace", str(store), *target, "--delay-levels", LEVELS, "--json")
    assert res.returncode == 0, res.stderr
    res2 = _mqtool("trace", str(store), *target, "--delay-levels", LEVELS, "--html", str(out))
    assert res2.returncode == 0, res2.stderr
    assert f"wrote {out}" in res2.stderr
    return json.loads(res.stdout), out.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def resent_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the journey store in which j-always-1 was resent from its DLQ."""
    dst = tmp_path_factory.mktemp("resent") / "store"
    shutil.copytree(store_dir("4.9.7/journey"), dst)
    res = _mqtool("dlq", "resend", str(dst), "--group", "cg_journey", "--key", "j-always-1",
                  "--target", str(dst))
    assert res.returncode == 0, res.stderr
    return dst


CASES = {
    # name: (store, arguments, hop kinds expected on the page)
    "dead-lettered": ("journey", ["--key", "j-always-1"],
                      ["original"] + ["schedule", "retry"] * 3 + ["dlq"]),
    "pending": ("journey", ["--key", "j-long-0"], ["original", "schedule"]),
    "resent": ("resent", ["--key", "j-always-1"],
               ["original"] + ["schedule", "retry"] * 3 + ["dlq", "resend"]),
    "by-id": ("journey", ["C000020247AB5FFD2B276B8361EB0007"],
              ["original"] + ["schedule", "retry"] * 3 + ["dlq"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_trace_page_numbers_equal_json_and_render(
    case: str, resent_store: Path, tmp_path: Path
) -> None:
    which, target, kinds = CASES[case]
    store = resent_store if which == "resent" else store_dir("4.9.7/journey")
    doc, text = _json_and_page(store, target, tmp_path / f"{case}.html")
    data = read_page_data(text)
    assert data == doc  # every number on the page comes from the --json document
    traces = data["traces"] if "traces" in data else [data]
    assert [h["kind"] for h in traces[0]["hops"]] == kinds
    assert_self_contained(text)
    # what the page shows in words: verdict, each hop's topic and state
    assert traces[0]["verdict"].replace("&", "&amp;") in text
    for h in traces[0]["hops"]:
        assert f"{h['kind']} · {h['topic']} q{h['queueId']}@{h['queueOffset']}" in text
    if case == "pending":
        assert "pending: due 22:02:52.491" in text  # the due time at the end of the span
        assert "still pending" in text
    if case == "resent":  # where the copy went, not a command to resend it again
        assert "resent from DLQ record" in text
        assert "Resend it" not in text and traces[0]["resendCommand"] is None
        assert f"Resent already: the copy is {traces[0]['resentTo']}" in text
        assert traces[0]["resentTo"].startswith("%RETRY%cg_journey q0@13 at ")
    if case in ("dead-lettered", "by-id"):
        assert "Resend it:" in text and traces[0]["resentTo"] is None

    png = shot_path(tmp_path, f"trace-{case}.png")
    seen = render(tmp_path / f"{case}.html", png)
    assert seen.page_errors == []
    assert seen.cut and not any(seen.cut), seen.cut  # every table fits a 1280 px window
    assert [c for c in seen.console if c[0] in ("error", "warning")] == []
    assert seen.requests == [(tmp_path / f"{case}.html").resolve().as_uri()]
    assert seen.title.startswith("mqtool trace")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000


def test_trace_html_bad_output_path(tmp_path: Path) -> None:
    res = _mqtool("trace", str(store_dir("4.9.7/journey")), "--key", "j-ok-0",
                  "--html", str(tmp_path / "no-such-dir" / "x.html"))
    assert res.returncode == 2
    assert res.stderr.startswith("error: ") and "does not exist" in res.stderr
    assert "Traceback" not in res.stderr
    assert list(tmp_path.iterdir()) == []
