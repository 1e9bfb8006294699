"""The driver JVM's class-data archive (CDS): built once by ``make dev``, used by every session.

A Spark driver loads about 20,000 classes, most of them while the session starts and while the
first queries are planned. A dynamic CDS archive (JDK 13+, ``-XX:ArchiveClassesAtExit``) keeps
them parsed and verified in one file that later JVMs map, so a session starts and plans its first
queries sooner (bench/scan measures it).

``python -m mqtool.spark.classarchive`` builds it: a session with
``-XX:ArchiveClassesAtExit`` scans the reference store of the fixtures with every audit (the
classes a scan needs), stops, and the JVM writes the archive as it exits; the file is renamed
into place only then, so a session never maps a half-written archive.
:func:`mqtool.spark.session.get_session` hands the archive to the driver JVM when it exists
(``-XX:SharedArchiveFile``, ``-Xshare:auto``). A JVM that cannot use it (another JDK, another
pyspark) says so in the driver's log and starts without it: nothing else changes.
``MQTOOL_SPARK_CDS=0`` turns it off.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mqtool.spark.session import CLASS_ARCHIVE, spark_log_path

TRAINING_STORE = Path(__file__).resolve().parents[1] / "fixtures" / "rocketmq-stores" / \
    "4.9.7" / "journey" / "store"
"""The store the archive's session scans (a real RocketMQ 4.9.7 store with every topic kind)."""


def build(out: Path = CLASS_ARCHIVE, store: Path = TRAINING_STORE, timeout: float = 600) -> Path:
    """Write the archive to ``out`` (returns it); raises ``RuntimeError`` when the JVM wrote
    none (no JDK with CDS, or it did not exit in ``timeout`` seconds)."""
    from mqtool.spark.scan import run_scan
    from mqtool.spark.session import get_session

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    os.environ["MQTOOL_SPARK_CDS"] = "0"  # this session writes the archive, it maps none
    spark = get_session("local[2]", {
        "spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={tmp}",
    })
    proc = spark.sparkContext._gateway.proc  # type: ignore[union-attr]  # noqa: SLF001
    try:
        run_scan(spark, [str(store)])
    finally:
        spark.stop()
        proc.stdin.close()  # the JVM exits at the end of its stdin, and writes the archive
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        if proc.poll() is None:
            proc.kill()
    if proc.returncode != 0 or not tmp.is_file() or tmp.stat().st_size == 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"the JVM wrote no class-data archive (exit {proc.returncode})")
    problem = _unusable(tmp)
    if problem is not None:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(problem)
    os.replace(tmp, out)
    spark_log_path().unlink(missing_ok=True)
    return out


def _unusable(archive: Path) -> str | None:
    """Why a JVM cannot start with ``archive`` (None: it can). A JVM ignores an archive of
    another JDK or class path with a warning, but dies on a truncated one (a full disk while
    it was written): one is started with it before it is put in place."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else "java"  # as spark-class finds it
    try:
        with tempfile.TemporaryDirectory() as scratch:  # where a dying JVM leaves its hs_err
            run = subprocess.run(
                [java, f"-XX:SharedArchiveFile={archive}", "-Xshare:auto",
                 "-XX:-CreateCoredumpOnCrash", "-version"],
                capture_output=True, timeout=120, check=False, cwd=scratch)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"cannot start {java} to check the archive: {e}"
    if run.returncode != 0:
        return f"a JVM with the new archive exited {run.returncode}: the archive is damaged"
    return None


def main() -> int:
    try:
        path = build()
    except Exception as e:  # noqa: BLE001 - any failure: Spark simply starts without it
        print(f"no class-data archive: {e}; Spark starts without it", file=sys.stderr)
        return 0
    print(f"class-data archive: {path} ({path.stat().st_size // (1 << 20)} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
