"""Headless Chromium (Debian's ``chromium``, driven by Playwright) for the page tests.

``render(path, png)`` opens a page from a file:// URL with every other request refused and
recorded, collects console messages and page errors, and saves a full-page screenshot.
``make chromium`` installs the browser; the tests fail (never skip) when it is missing.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


@dataclass
class Rendered:
    console: list[tuple[str, str]] = field(default_factory=list)  # (type, text)
    page_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    title: str = ""
    sorted_column: list[str] = field(default_factory=list)
    cut: list[int] = field(default_factory=list)  # px of each table hidden past its box


def render(
    page_path: Path, png: Path, *, width: int = 1280, sort_table: str | None = None,
    sort_column: int = 0,
) -> Rendered:
    """Open ``page_path`` in headless Chromium, screenshot it to ``png``."""
    from playwright.sync_api import sync_playwright

    out = Rendered()
    with tempfile.TemporaryDirectory(prefix="mqtool-chromium-") as profile, \
            sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=FLAGS,
            viewport={"width": width, "height": 900}, offline=True,
        )
        try:
            page = ctx.new_page()
            page.on("console", lambda m: out.console.append((m.type, m.text)))
            page.on("pageerror", lambda e: out.page_errors.append(str(e)))
            page.on("request", lambda r: out.requests.append(r.url))

            def refuse(route):  # type: ignore[no-untyped-def]
                if route.request.url.startswith("file://"):
                    route.continue_()
                else:
                    route.abort()

            page.route("**/*", refuse)
            page.goto(page_path.resolve().as_uri(), wait_until="load")
            out.title = page.title()
            out.cut = page.evaluate(  # a table wider than its box needs a sideways scroll
                "Array.from(document.querySelectorAll('.scroll'))"
                ".map(d => d.scrollWidth - d.clientWidth)")
            if sort_table:  # click a header of that table twice (descending), read the column
                th = page.locator(f"{sort_table} thead th").nth(sort_column)
                th.click()
                th.click()
                out.sorted_column = page.locator(
                    f"{sort_table} tbody tr td:nth-child({sort_column + 1})").all_inner_texts()
            page.screenshot(path=str(png), full_page=True)
        finally:
            ctx.close()
    return out


def shot_path(tmp_path: Path, name: str) -> Path:
    """Where a screenshot goes: $MQTOOL_SCREENSHOTS (to look at them) or the test's tmp dir."""
    d = Path(os.environ.get("MQTOOL_SCREENSHOTS") or tmp_path)
    d.mkdir(parents=True, exist_ok=True)
    return d / name


def assert_self_contained(text: str) -> None:
    # nothing to fetch: every src/href/url() points inside the page (#id), no @import
    refs = re.findall(r"""(?:\b(?:src|href)\s*=\s*["']|url\(\s*["']?)([^"')\s]*)""", text, re.I)
    assert refs and all(r.startswith("#") for r in refs), refs
    assert "@import" not in text and "<link" not in text
    assert "<svg" in text


def small_png(png: Path, out: Path, width: int = 1100) -> None:
    """A README copy of a screenshot: scaled to ``width`` px, 256 colours (Pillow)."""
    from PIL import Image

    with Image.open(png) as im:
        rgb = im.convert("RGB")
        if rgb.width > width:
            rgb = rgb.resize((width, round(rgb.height * width / rgb.width)), Image.LANCZOS)
        rgb.quantize(colors=256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE).save(
            out, optimize=True)


if __name__ == "__main__":  # python tests/report/report_browser.py PAGE.html OUT.png
    import sys

    page, target = Path(sys.argv[1]), Path(sys.argv[2])
    full = target.with_suffix(".full.png")
    seen = render(page, full, width=1440)
    small_png(full, target)
    full.unlink()
    print(f"{target}: {target.stat().st_size} bytes; console {seen.console}, "
          f"errors {seen.page_errors}, requests {len(seen.requests)}")
