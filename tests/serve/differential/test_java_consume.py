"""The official Java client's consumers against ``mqtool serve`` and against the real broker
of the same version (``Flow.java``): what they saw must be the same.

Each side is started once for the module, on 127.0.0.1, over a fresh store, with the same
broker.conf (:data:`harness.BROKER_CONF`). Every flow uses topics and groups of its own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.serve.differential import harness

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.Sides]:
    s = harness.Sides("4.9.7", tmp_path_factory.mktemp("consume"))
    s.start()
    try:
        yield s
    finally:
        s.kill()


@pytest.mark.parametrize("flow,prefix", [
    ("orderly", "O"),  # an orderly consumer, one message failing until the DLQ
    ("pull", "L"),  # lite pull with assign and seek; pull by offset
    ("query", "Q"),  # view by offset id and unique key, query by key
    ("retry", "T"),  # a push consumer fails two messages through %RETRY% to %DLQ%
    ("broadcast", "B"),  # two broadcasting consumers each get every message
    ("filter", "F"),  # a tag filter; SQL92 filters, two of them refused by the broker
])
def test_consume_flow(sides: harness.Sides, flow: str, prefix: str) -> None:
    """The same deliveries, properties and reconsume times on both sides."""
    harness.compare_flow(flow, sides.flow(flow, prefix))
