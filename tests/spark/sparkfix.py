"""Shared Spark fixtures of the scan tests (imported by each test module).

One local session for the whole test run (``local[2]``, UI off, 2 shuffle partitions), made by
mqtool's own :func:`mqtool.spark.session.get_session`, and one scan over all fixture stores
that several tests read from.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import SCENARIOS, store_dir

# Late in every fixture store's life: every schedule entry with a deliver time is overdue
# by then except the ones the tests construct explicitly.
NOW_MS = 1795298000000  # 2026-11-21T21:53:20Z: between the journey's level-16 and level-17 times


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from mqtool.spark.session import session_scope

    with session_scope("local[2]", {"spark.sql.shuffle.partitions": "2"}) as session:
        yield session


@pytest.fixture(scope="session")
def fixture_scan(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """run_scan over every fixture store at once, with --out (Parquet) and --sql."""
    from mqtool.spark.scan import run_scan

    out = tmp_path_factory.mktemp("scan-out")
    stores = [str(store_dir(s)) for s in SCENARIOS]
    # small splits so that every commitlog file is cut and resynchronised many times
    result = run_scan(
        spark, stores, out=out, now_ms=NOW_MS, split_size=3000, partition_bytes=1 << 20,
        sql="select store, topic, count(*) as n from messages group by store, topic",
    )
    return result


def store_of(scenario: str) -> str:
    return str(store_dir(scenario))


def rows_for(summary: dict[str, Any], audit: str, scenario: str) -> list[dict[str, Any]]:
    return [r for r in summary[audit] if r["store"] == store_of(scenario)]


__all__ = ["NOW_MS", "fixture_scan", "rows_for", "spark", "store_of", "Path"]
