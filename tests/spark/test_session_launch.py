"""The driver JVM's launch: pyspark's wait for the gateway looks every few milliseconds, and
pyspark's module is left as it was."""

from __future__ import annotations

import time
from typing import Any

import pytest
from sparkfix import spark  # noqa: F401


def test_the_gateway_wait_sleeps_at_most_the_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    from mqtool.spark.session import GATEWAY_POLL_SECONDS, _GatewayClock

    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    clock = _GatewayClock()
    clock.sleep(0.1)  # pyspark's poll
    clock.sleep(0.001)
    assert slept == [GATEWAY_POLL_SECONDS, 0.001]
    assert clock.monotonic is time.monotonic  # the rest is the time module's


@pytest.mark.slow
def test_a_started_session_leaves_pyspark_its_time(spark: Any) -> None:  # noqa: F811
    from pyspark import java_gateway

    assert spark.sparkContext._jsc is not None  # the JVM was launched by mqtool's session
    assert java_gateway.time is time
