"""The official Java client's consumers against ``mqtool serve`` and against the real broker
of the same version (``Flow.java``), 4.9.7 and 5.3.3: what they saw must be the same.

Each side is started once for the module and version, on 127.0.0.1, over a fresh store, with
the same broker.conf (:data:`harness.BROKER_CONF`). Every flow uses topics and groups of its own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.serve.differential import harness

pytestmark = pytest.mark.slow


#: Each flow and the prefix of its topics and groups.
FLOWS = [
    ("orderly", "O"),  # an orderly consumer, one message failing until the DLQ
    ("pull", "L"),  # lite pull with assign and seek; pull by offset
    ("query", "Q"),  # view by offset id and unique key, query by key
    ("retry", "T"),  # a push consumer fails two messages through %RETRY% to %DLQ%
    ("broadcast", "B"),  # two broadcasting consumers each get every message
    ("filter", "F"),  # a tag filter; SQL92 filters, two of them refused by the broker
]


@pytest.fixture(scope="module")
def sides(request: pytest.FixtureRequest,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.Sides]:
    s = harness.Sides(str(request.param), tmp_path_factory.mktemp(f"consume-{request.param}"))
    s.start()
    try:
        yield s
    finally:
        s.kill()


# Two parametrize marks, not one over (version, flow, prefix) cases: the version alone is the
# module-scoped fixture's parameter, so each version's sides start once for all its flows.
@pytest.mark.parametrize(("flow", "prefix"), FLOWS)
@pytest.mark.parametrize("sides", ["4.9.7", "5.3.3"], indirect=True)
def test_consume_flow(sides: harness.Sides, flow: str, prefix: str) -> None:
    """The same deliveries, properties and reconsume times on both sides. What a lite pull
    consumer polls before the messages at its seek offset (``.stale``: fetched by a pull
    under way when it sought, a race of the 5.3.3 client's) is timing and left out."""
    obs = sides.flow(flow, prefix)
    harness.compare_flow(flow, {side: [o for o in got if not o["step"].endswith(".stale")]
                                for side, got in obs.items()})
    if flow == "pull":
        for side, got in obs.items():
            polled = [o["m"]["queueOffset"] for o in got if o["step"] == "lite.poll"]
            again = [o["m"]["queueOffset"] for o in got if o["step"] == "lite.poll.again"]
            assert polled == [2, 3, 4] and again == [4], (side, got)
