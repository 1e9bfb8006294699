"""A self-contained HTML page: inline CSS, inline SVG charts, a little inline JS, embedded data.

Nothing on the page is fetched: no stylesheet, font, script or image URL. The data the page was
drawn from is embedded verbatim as JSON in ``<script type="application/json" id="mqtool-data">``
so that a program (and the tests) can read the numbers back and compare them with the command's
``--json`` output.
"""

from __future__ import annotations

import html
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from mqtool.formats.errors import MqtoolError, environment, usage

DATA_ELEMENT_ID = "mqtool-data"
"""The id of the ``<script type="application/json">`` element holding the page's data."""


class ReportError(MqtoolError):
    """A page that cannot be written (bad output path, ...)."""


class Cell(NamedTuple):
    """A table cell shown as ``text`` but sorted by ``sort`` (e.g. an offset shown in hex)."""

    text: str
    sort: int | float | str


def esc(value: object) -> str:
    """Text for HTML (``None`` shows as ``-``)."""
    return "-" if value is None else html.escape(str(value))


_CSS = """
:root { --fg:#1f2328; --muted:#59636e; --line:#d1d9e0; --bg:#ffffff; --panel:#f6f8fa;
  --accent:#0969da; --bad:#cf222e; --warn:#9a6700; --ok:#1a7f37; }
* { box-sizing: border-box; }
body { margin:0; font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif;
  color:var(--fg); background:var(--bg); }
header { padding:18px 28px 10px; border-bottom:1px solid var(--line); background:var(--panel); }
header h1 { margin:0 0 4px; font-size:20px; }
header .sub { color:var(--muted); }
main { padding:8px 28px 40px; }
h2 { font-size:17px; margin:26px 0 8px; padding-bottom:4px; border-bottom:1px solid var(--line); }
h3 { font-size:15px; margin:18px 0 6px; }
p.note { color:var(--muted); margin:4px 0 8px; }
.cards { display:flex; flex-wrap:wrap; gap:10px; margin:10px 0; }
.card { border:1px solid var(--line); border-radius:6px; padding:8px 14px; min-width:130px;
  background:var(--panel); }
.card .v { font-size:20px; font-weight:600; }
.card .k { color:var(--muted); font-size:12px; }
.card.bad .v { color:var(--bad); } .card.ok .v { color:var(--ok); }
.card.warn .v { color:var(--warn); }
figure { margin:8px 0 14px; } figure svg { max-width:100%; height:auto; }
.scroll { overflow-x:auto; margin:6px 0 14px; }
table { border-collapse:collapse; font-size:13px; }
td.wide { min-width:260px; }
td.id { max-width:150px; word-break:break-all; }
td.nowrap { white-space:nowrap; }
th, td { border:1px solid var(--line); padding:3px 8px; text-align:left; vertical-align:top; }
th { background:var(--panel); white-space:nowrap; }
td.num { text-align:right; font-variant-numeric: tabular-nums; }
table.sortable th { cursor:pointer; user-select:none; }
table.sortable th::after { content:" \\2195"; color:var(--muted); font-size:11px; }
table.sortable th[aria-sort=ascending]::after { content:" \\2191"; color:var(--fg); }
table.sortable th[aria-sort=descending]::after { content:" \\2193"; color:var(--fg); }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  font-size:12px; }
.verdict { font-size:16px; font-weight:600; margin:8px 0; }
.verdict.dead-lettered, .verdict.lost { color:var(--bad); } .verdict.consumed { color:var(--ok); }
.verdict.waiting-retry, .verdict.scheduled { color:var(--warn); }
.state-pending, .state-overdue, .state-not-consumed { color:var(--warn); font-weight:600; }
.state-dead-lettered, .state-rolled-back, .state-never-delivered { color:var(--bad);
  font-weight:600; }
.state-consumed, .state-delivered, .state-committed { color:var(--ok); }
pre.cmd { background:var(--panel); border:1px solid var(--line); padding:6px 10px;
  white-space:pre-wrap; word-break:break-all; }
.problems { border:1px solid var(--bad); background:#ffebe9; color:var(--bad);
  border-radius:6px; padding:8px 14px; margin:12px 0; }
.problems ul { margin:4px 0 0; padding-left:20px; }
footer { color:var(--muted); font-size:12px; padding:0 28px 24px; }
"""

# Click a header of a .sortable table to sort by it (numbers numerically, else text).
_SORT_JS = """
(function () {
  function key(td) {
    var v = td.getAttribute("data-sort");
    if (v === null) { v = td.textContent.trim(); }
    var n = Number(v);
    return (v !== "" && !isNaN(n)) ? n : v.toLowerCase();
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = table.querySelectorAll("thead th");
    heads.forEach(function (th, col) {
      th.addEventListener("click", function () {
        var asc = th.getAttribute("aria-sort") !== "ascending";
        heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", asc ? "ascending" : "descending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = key(a.cells[col]), y = key(b.cells[col]);
          if (typeof x !== typeof y) { x = String(x); y = String(y); }
          return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1);
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
})();
"""


@dataclass
class Page:
    """An HTML page built piece by piece, then :meth:`render` ed to one string."""

    title: str
    subtitle: str = ""
    data: Any = None
    parts: list[str] = field(default_factory=list)
    sortable: bool = False

    def h2(self, text: str, anchor: str | None = None) -> None:
        a = f' id="{esc(anchor)}"' if anchor else ""
        self.parts.append(f"<h2{a}>{esc(text)}</h2>")

    def h3(self, text: str) -> None:
        self.parts.append(f"<h3>{esc(text)}</h3>")

    def note(self, text: str) -> None:
        self.parts.append(f'<p class="note">{esc(text)}</p>')

    def raw(self, markup: str) -> None:
        """Markup the caller built (and escaped) itself."""
        self.parts.append(markup)

    def problems(self, lines: list[str]) -> None:
        """Damage the command found while reading: one red line each (never hidden)."""
        if lines:
            items = "".join(f"<li><code>{esc(t)}</code></li>" for t in lines)
            self.parts.append(
                f'<div class="problems"><b>{len(lines)} problem(s) found while reading the '
                f"store</b><ul>{items}</ul></div>"
            )

    def cards(self, items: list[tuple[str, object, str]]) -> None:
        """Big numbers: (label, value, style) with style '', 'ok', 'warn' or 'bad'."""
        cells = "".join(
            f'<div class="card {esc(style)}"><div class="v">{esc(value)}</div>'
            f'<div class="k">{esc(label)}</div></div>'
            for label, value, style in items
        )
        self.parts.append(f'<div class="cards">{cells}</div>')

    def figure(self, svg: str, caption: str = "") -> None:
        cap = f"<figcaption class=\"note\">{esc(caption)}</figcaption>" if caption else ""
        self.parts.append(f"<figure>{svg}{cap}</figure>")

    def table(
        self,
        columns: list[str],
        rows: list[list[Any]],
        *,
        sortable: bool = False,
        css_class: str = "",
        cell_class: list[list[str]] | None = None,
    ) -> None:
        """A table; numbers are right-aligned and sort numerically."""
        if sortable:
            self.sortable = True
        cls = " ".join(c for c in (css_class, "sortable" if sortable else "") if c)
        head = "".join(f"<th>{esc(c)}</th>" for c in columns)
        body: list[str] = []
        for i, row in enumerate(rows):
            tds: list[str] = []
            for j, v in enumerate(row):
                extra = cell_class[i][j] if cell_class else ""
                if isinstance(v, Cell):
                    c = f' class="{esc(extra)}"' if extra else ""
                    tds.append(f'<td{c} data-sort="{esc(v.sort)}">{esc(v.text)}</td>')
                elif isinstance(v, bool) or v is None or not isinstance(v, int | float):
                    c = f' class="{esc(extra)}"' if extra else ""
                    tds.append(f"<td{c}>{esc(v)}</td>")
                else:
                    tds.append(f'<td class="num {esc(extra)}" data-sort="{v}">{v}</td>')
            body.append("<tr>" + "".join(tds) + "</tr>")
        c = f' class="{cls}"' if cls else ""
        self.parts.append(
            f'<div class="scroll"><table{c}><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table></div>"
        )

    def render(self) -> str:
        # "<" only occurs inside JSON strings; as \u003c no "</script" or "<!--" can end or
        # confuse the data element (the same JSON value to any parser).
        data = json.dumps(self.data, ensure_ascii=False).replace("<", "\\u003c")
        script = f"<script>{_SORT_JS}</script>" if self.sortable else ""
        sub = f'<div class="sub">{esc(self.subtitle)}</div>' if self.subtitle else ""
        return (
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(self.title)}</title><style>{_CSS}</style></head><body>"
            f"<header><h1>{esc(self.title)}</h1>{sub}</header><main>"
            + "\n".join(self.parts)
            + "</main><footer>Made by mqtool. Self-contained: every chart and style is inside "
            "this file; the data it was drawn from is embedded as JSON "
            f"(script#{DATA_ELEMENT_ID}).</footer>"
            f'<script type="application/json" id="{DATA_ELEMENT_ID}">{data}</script>'
            f"{script}</body></html>\n"
        )


def check_target(path: Path) -> Path:
    """Fail early (before long work) when ``path`` cannot be a page file; its directory."""
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise usage(ReportError(f"{target}: directory {parent} does not exist"))
    if target.is_dir():
        raise usage(ReportError(f"{target}: is a directory"))
    return parent


def write_page(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (temporary file, fsync, rename)."""
    target = Path(path)
    parent = check_target(target)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    except OSError as e:
        raise environment(ReportError(f"{target}: cannot write: {e.strerror or e}")) from e
    try:
        umask = os.umask(0o022)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as an ordinary new file, not mkstemp's 0600
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise environment(ReportError(f"{target}: cannot write: {e.strerror or e}")) from e


def read_page_data(text: str) -> Any:
    """The JSON data embedded in a page made by :class:`Page` (for tests and tools)."""
    start_tag = f'<script type="application/json" id="{DATA_ELEMENT_ID}">'
    i = text.find(start_tag)
    if i < 0:
        raise ReportError("no embedded mqtool data in this page")
    j = text.find("</script>", i)
    return json.loads(text[i + len(start_tag): j])
