"""Pictures: self-contained HTML pages (inline SVG charts, embedded JSON data, no network).

:mod:`mqtool.report.page` builds a page, :mod:`mqtool.report.charts` draws the charts
(matplotlib SVG), :mod:`mqtool.report.timeline` is ``mqtool trace --html`` and
:mod:`mqtool.report.scan_report` is ``mqtool scan --report``.
"""
