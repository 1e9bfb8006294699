"""SQL92 filters of RocketMQ 5.3.3 (CONTAINS, STARTSWITH, ENDSWITH and their NOT forms, which
4.9.7's parser does not know): the official 5.3.3 Java client against ``mqtool serve --dialect
5.3.3`` and against the real 5.3.3 broker, both with ``enablePropertyFilter`` (``Flow.java``
``filter5``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.serve.differential import harness

pytestmark = pytest.mark.slow


def test_sql92_filters_of_5x(tmp_path: Path) -> None:
    sides = harness.Sides("5.3.3", tmp_path)
    sides.start()
    try:
        harness.compare_flow("filter5", sides.flow("filter5", "F5"))
    finally:
        sides.kill()
