"""Charts as inline SVG, drawn with matplotlib (imported only when a page is built).

Why matplotlib SVG (see README "Pictures"): the SVG is static markup, so a page needs no
JavaScript library to show its charts, opens offline in any browser (and in mail clients that
block scripts), and stays small (about 20 KB a chart, text kept as text). Vega-Lite through
altair looks as good and adds tooltips, but inlining its JavaScript costs about 900 KB a page
and an 84 MB converter package (vl-convert) to fetch the bundle offline.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# Colour per hop kind / chart series (colour-blind-safe Okabe-Ito palette first).
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
           "#000000", "#999999", "#882255", "#44AA99", "#117733"]

_RC: dict[Any, Any] = {
    "svg.fonttype": "none",  # text stays <text>: smaller, selectable, browser font
    "svg.hashsalt": "mqtool",  # stable ids: the same data gives the same bytes
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],  # ships with matplotlib: same metrics everywhere
    "font.size": 9.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#e4e8ec",
    "grid.linewidth": 0.8,
    "axes.axisbelow": True,
    "axes.edgecolor": "#8c959f",
    "axes.titlesize": 11,
    "axes.titleweight": "bold",
    "axes.titlelocation": "left",
    "legend.frameon": False,
    "legend.fontsize": 8.5,
    "xtick.color": "#424a53",
    "ytick.color": "#424a53",
}


@contextmanager
def figure(width: float = 9.0, height: float = 3.2) -> Iterator[Figure]:
    """A matplotlib Figure (no pyplot, no global state) under the report style."""
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context(_RC):
        yield Figure(figsize=(width, height), layout="constrained")


_HEAD = re.compile(r"^.*?(?=<svg)", re.S)


def svg(fig: Figure) -> str:
    """The figure as an inline ``<svg>`` element (XML prolog and DOCTYPE dropped)."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context(_RC):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    return _HEAD.sub("", buf.getvalue(), count=1)


def color_map(names: list[str]) -> dict[str, str]:
    """A stable colour for each name (in the order given)."""
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}
