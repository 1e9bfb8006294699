"""The official 5.3.3 Java client against ``mqtool serve --dialect 5.3.3`` and against the
real 5.3.3 broker (``Flow.java``): the producer and rebalance flows of :mod:`test_java`, with
their checks, and the SQL92 filters only 5.x knows (CONTAINS, STARTSWITH, ENDSWITH and their
NOT forms), both sides with ``enablePropertyFilter``.

The transaction flows are compared on 4.9.7 only: a 5.3.3 broker writes the op records of
ended transactions in batches (``transactionOpBatchInterval``, 3 s), so with the harness's
3 s ``transactionTimeOut`` whether it checks back a transaction already committed or rolled
back depends on timing; serve writes each op record at once.

Each side is started once for the module, on 127.0.0.1, over a fresh store, with the same
broker.conf (:data:`harness.BROKER_CONF`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.serve.differential import harness
from tests.serve.differential.test_java import test_produce, test_rebalance

pytestmark = pytest.mark.slow

__all__ = ["test_produce", "test_rebalance"]


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.Sides]:
    s = harness.Sides("5.3.3", tmp_path_factory.mktemp("diff-5.3.3"))
    s.start()
    try:
        yield s
    finally:
        s.kill()


def test_sql92_filters_of_5x(sides: harness.Sides) -> None:
    harness.compare_flow("filter5", sides.flow("filter5", "F5"))
