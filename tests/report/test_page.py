"""The page builder on its own: hostile text stays text, the data round-trips, writes are whole."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mqtool.report.page import Cell, Page, ReportError, read_page_data, write_page

HOSTILE = '</script><script>alert(1)</script> <b>&amp; "q" \'s\' 用户 🚀'


def test_hostile_text_stays_text_and_data_round_trips() -> None:
    data = {"topic": HOSTILE, "n": [1, 2.5, None, True], "nested": {"k": "<\\/x>"}}
    page = Page(title=HOSTILE, subtitle=HOSTILE, data=data)
    page.h2(HOSTILE)
    page.note(HOSTILE)
    page.cards([(HOSTILE, HOSTILE, "bad")])
    page.problems([HOSTILE])
    page.table(["a", "b", "c"], [[HOSTILE, 7, Cell("0x10", 16)]], sortable=True)
    text = page.render()
    assert read_page_data(text) == data
    # one script element for the data, one for sorting: the hostile text opened none
    assert text.count("<script") == 2 and text.count("</script>") == 2
    assert "<b>&amp;" not in text and "&lt;/script&gt;&lt;script&gt;alert(1)" in text
    assert '<td class="num " data-sort="7">7</td>' in text
    assert '<td data-sort="16">0x10</td>' in text


def test_no_sort_script_without_a_sortable_table() -> None:
    page = Page(title="t", data={})
    page.table(["a"], [[1]])
    assert page.render().count("<script") == 1


def test_write_page_is_whole_and_refuses_bad_paths(tmp_path: Path) -> None:
    target = tmp_path / "p.html"
    write_page(target, "<p>one</p>")
    write_page(target, "<p>two</p>")
    assert target.read_text(encoding="utf-8") == "<p>two</p>"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.html"]  # no temporary left
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask
    with pytest.raises(ReportError, match="does not exist"):
        write_page(tmp_path / "missing" / "p.html", "x")
    with pytest.raises(ReportError, match="is a directory"):
        write_page(tmp_path, "x")
    with pytest.raises(ReportError, match="no embedded mqtool data"):
        read_page_data("<html></html>")
