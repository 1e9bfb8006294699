"""The driver JVM's class-data archive (``make dev``, mqtool.spark.classarchive): built, handed
to every session and mapped by its JVM; a damaged archive is never put in place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sparkfix import spark  # noqa: F401

pytestmark = pytest.mark.slow


def test_make_dev_built_the_archive_and_the_driver_maps_it(spark: Any) -> None:  # noqa: F811
    from mqtool.spark.session import class_archive, spark_log_path

    archive = class_archive()
    assert archive is not None, "make dev builds spark/jars/spark-classes.jsa"
    jvm = spark._jvm
    bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
    assert bean.getVMOption("SharedArchiveFile").getValue() == str(archive)
    # a JVM that cannot use an archive says so on its console (the driver's log) and goes on
    log = spark_log_path().read_text(encoding="utf-8", errors="replace")
    assert "[cds" not in log, log[-2000:]


def test_an_archive_a_jvm_cannot_start_with_is_refused(tmp_path: Path) -> None:
    from mqtool.spark.classarchive import _unusable
    from mqtool.spark.session import CLASS_ARCHIVE

    cut = tmp_path / "cut.jsa"
    with open(CLASS_ARCHIVE, "rb") as f:  # what a full disk leaves: the JVM dies on it
        cut.write_bytes(f.read(CLASS_ARCHIVE.stat().st_size // 3))
    crash_logs = set(Path.cwd().glob("hs_err_pid*.log"))
    assert _unusable(cut) is not None
    assert set(Path.cwd().glob("hs_err_pid*.log")) == crash_logs  # its crash log not left here
    assert _unusable(CLASS_ARCHIVE) is None
