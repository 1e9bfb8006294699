"""A quiet Spark session for mqtool, and a progress bar that follows Spark's stages.

pyspark is imported inside the functions only: importing this module (or ``mqtool.spark``)
stays cheap, so ``mqtool --help`` and the non-Spark commands never load it.

What :func:`get_session` arranges:

- ``master`` defaults to ``local[*]``; anything Spark accepts works (``local[2]``,
  ``spark://host:7077``, ``yarn``); ``conf`` pairs are passed through and win over mqtool's
  defaults.
- The Python workers run this very interpreter (``PYSPARK_PYTHON`` and
  ``PYSPARK_DRIVER_PYTHON`` = ``sys.executable``), so executors see the same mqtool and numpy.
  On a cluster whose nodes keep Python elsewhere, pass ``--conf spark.pyspark.python=...``.
- Start-up noise stays off the user's terminal: the driver JVM's stdout and stderr go to a log
  file (:func:`spark_log_path`), the JVMs use the ``log4j2.properties`` shipped beside this
  module (errors only), and the SparkContext log level is ``ERROR``.
- The web UI and Spark's own console progress bar are off; few shuffle partitions.
- The driver JVM maps the class-data archive ``make dev`` built (:func:`class_archive`,
  :mod:`mqtool.spark.classarchive`): the session starts sooner.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqtool.formats.store_dirs import COMMITLOG_DIR, numbered_files, store_root

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

LOG4J2_PROPERTIES = Path(__file__).with_name("log4j2.properties")
"""The log4j2 configuration mqtool hands to every Spark JVM it starts."""

DEFAULT_MASTER = "local[*]"

JAVA_READER_JAR = Path(__file__).with_name("jars") / "mqtool-spark.jar"
"""mqtool's Java commitlog reader (``spark/java``): built by ``make dev``, and in the wheel."""


def java_reader_jar() -> Path | None:
    """The Java reader's jar (``MQTOOL_SPARK_JAVA=0`` turns it off: the commitlog is then read
    by the Python data source alone).

    The one beside this module (``make dev``, a wheel); else one compiled into the user's cache
    for these Java sources and this pyspark, built there on first use when a JDK is there
    (:mod:`mqtool.spark.javabuild`; a line on stderr says so); else None (no JDK)."""
    if os.environ.get("MQTOOL_SPARK_JAVA", "1") == "0":
        return None
    if JAVA_READER_JAR.is_file():
        return JAVA_READER_JAR
    from importlib.metadata import PackageNotFoundError, version

    from mqtool.formats.usercache import user_cache_dir
    from mqtool.spark import javabuild

    try:
        spark_version = version("pyspark")
    except PackageNotFoundError:
        return None
    cached = user_cache_dir("spark") / (
        f"mqtool-spark-{javabuild.sources_digest()}-pyspark-{spark_version}.jar")
    if cached.is_file():
        return cached
    if javabuild.jdk_tools() is None:
        return None
    print(f"compiling mqtool's Spark reader into {cached} (once)", file=sys.stderr)
    try:
        return javabuild.compile_jar(cached)
    except javabuild.JavaBuildError as e:
        print(f"no Spark reader jar ({e}): the commitlog is read by the Python data source",
              file=sys.stderr)
        return None

CLASS_ARCHIVE = Path(__file__).with_name("jars") / "spark-classes.jsa"
"""The driver JVM's class-data archive, built by ``make dev`` (:mod:`mqtool.spark.classarchive`)."""


def class_archive() -> Path | None:
    """The class-data archive when it was built (``MQTOOL_SPARK_CDS=0`` turns it off)."""
    if os.environ.get("MQTOOL_SPARK_CDS", "1") == "0":
        return None
    return CLASS_ARCHIVE if CLASS_ARCHIVE.is_file() else None


_UID = os.getuid() if hasattr(os, "getuid") else 0
_LOG_DIR = Path(tempfile.gettempdir()) / f"mqtool-spark-{_UID}"


def spark_log_path() -> Path:
    """Where the driver JVM of this process writes its console output (log4j, warnings)."""
    return _LOG_DIR / f"driver-{os.getpid()}.log"


def default_conf(master: str) -> dict[str, str]:
    """mqtool's Spark defaults for ``master`` (user ``--conf`` pairs override them)."""
    java_opts = f"-Dlog4j2.configurationFile=file:{LOG4J2_PROPERTIES} -Dlog4j2.level=ERROR"
    conf = {
        "spark.app.name": "mqtool scan",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": java_opts,
        "spark.sql.session.timeZone": "UTC",
        # Python data sources hand Arrow batches to the JVM: keep them whole.
        "spark.sql.execution.arrow.maxRecordsPerBatch": "65536",
    }
    archive = class_archive()
    if archive is not None:  # the driver's classes mapped, not loaded (the executor, in local)
        conf["spark.driver.extraJavaOptions"] += f" -XX:SharedArchiveFile={archive} -Xshare:auto"
    jar = java_reader_jar()
    if jar is not None:  # shipped to every executor by Spark itself
        conf["spark.jars"] = str(jar)
    if master.startswith("local"):
        # The driver is the executor: a heap of about 130 MiB live after each collection
        # (bench/scan), where G1's concurrent threads take cores from the tasks. The serial
        # collector makes the CLI's scan on 2 cores faster (bench/scan).
        conf["spark.driver.extraJavaOptions"] += " -XX:+UseSerialGC"
        # A laptop's hostname often resolves to a loopback address; say so instead of warning.
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    return conf


SMALL_JOB_BYTES = 512 * 1024 * 1024
SHORT_JOB_BYTES = 4 * 1024 * 1024 * 1024
"""Up to this much commitlog data a local scan's JVM compiles with C1 alone (see
:func:`job_conf`)."""


def commitlog_bytes(stores: list[str] | tuple[str, ...]) -> int:
    """The commitlog bytes ``stores`` really hold (a sparse file's holes left out)."""
    total = 0
    for store in stores:
        for f in numbered_files(store_root(Path(store)) / COMMITLOG_DIR, strict=False):
            try:
                st = f.stat()
            except OSError:
                continue  # sizing only: a file that vanished is the scan's to report
            total += min(st.st_size, getattr(st, "st_blocks", 0) * 512 or st.st_size)
    return total


def job_conf(
    master: str, stores: list[str] | tuple[str, ...], small: int = SMALL_JOB_BYTES,
    short: int = SHORT_JOB_BYTES,
) -> dict[str, str]:
    """Spark settings sized to the job (local masters; on a cluster the executors are the
    cluster's business, ``--conf spark.executor.memory=...``): for the commitlog bytes the
    stores really hold (:func:`commitlog_bytes`).

    - The driver heap (which is the executor in ``local`` mode): the executors stream
      (nothing holds a whole file) and no message row is cached (only the audits' small
      aggregates), so the heap needs no more as the store grows: 512 MiB up to ``small``
      (512 MiB) of commitlog data, 1 GiB above. Spark's default is 1 GiB whatever the job.
    - The JIT: up to ``short`` (4 GiB) the JVM compiles with C1 alone
      (``-XX:TieredStopAtLevel=1``). A scan is one short life of a fresh JVM, in which C2's
      compilations cost more core time than their faster code wins back; on larger stores C2
      pays off (bench/scan measures both sides of the bound).

    User ``--conf`` pairs win (:func:`merge_conf`).
    """
    if not master.startswith("local"):
        return {}
    total = commitlog_bytes(stores)
    conf = {"spark.driver.memory": "512m" if total <= small else "1g"}
    if total <= short:
        conf["spark.driver.extraJavaOptions"] = "-XX:TieredStopAtLevel=1"
    return conf


def merge_conf(base: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """``base`` with ``extra``'s pairs winning, but ``*.extraJavaOptions`` appended (the later
    option wins in a JVM) and ``spark.jars`` added to (mqtool's reader stays)."""
    out = dict(base)
    for key, value in extra.items():
        if key.endswith("extraJavaOptions") and key in out:
            value = f"{out[key]} {value}"
        elif key == "spark.jars" and key in out:
            value = f"{out[key]},{value}"
        out[key] = value
    return out


def parse_conf(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``["k=v", ...]`` (the CLI's ``--conf``) to a dict; a pair without ``=`` is an error."""
    from mqtool.formats.errors import usage
    from mqtool.spark.errors import SparkScanError

    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise usage(SparkScanError(f"--conf expects key=value, got {pair!r}"))
        out[key.strip()] = value
    return out


_STARTED: dict[str, float] = {}


def start_seconds() -> dict[str, float]:
    """How long this process's Spark took to start, in seconds: ``jvm`` (the driver JVM's
    launch: spark-submit, then the py4j gateway), ``context`` (the SparkContext), ``session``
    (the SparkSession, when one was made); empty when this process started none."""
    return dict(_STARTED)


def process_seconds() -> float | None:
    """Seconds since this process started (Linux: ``/proc``; None elsewhere)."""
    try:
        with open("/proc/self/stat") as f:
            stat = f.read()
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        ticks = int(stat[stat.rindex(")") + 2:].split()[19])  # starttime, in clock ticks
        return round(uptime - ticks / os.sysconf("SC_CLK_TCK"), 3)
    except (OSError, ValueError, IndexError):
        return None


def _spark_conf(master: str, conf: Mapping[str, str] | None) -> Any:
    """The SparkConf of a session for ``master``: mqtool's defaults, ``conf`` winning."""
    from pyspark import SparkConf

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    settings = merge_conf(default_conf(master), conf or {})  # mqtool's log4j set-up and reader stay
    spark_conf = SparkConf()
    spark_conf.setMaster(master)
    for key, value in settings.items():
        spark_conf.set(key, value)
    return spark_conf


def get_context(
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
) -> SparkContext:
    """The SparkContext :func:`get_session` starts (this process's, when it has one), without
    a SparkSession: the jobs of ``FactsJob.java`` need no more, and a SparkSession costs the
    driver JVM about 1.8 CPU-s to make (its SQL configuration, extensions, catalog)."""
    from pyspark import SparkContext

    active = SparkContext._active_spark_context  # noqa: SLF001 - pyspark's own registry
    if active is not None:
        return active
    _STARTED.clear()
    sc = _start_context(_spark_conf(master or DEFAULT_MASTER, conf))
    sc.setLogLevel("ERROR")
    return sc


def get_session(
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A SparkSession for mqtool (reused as it is if this process already has one).

    ``master``: ``local[*]`` by default; ``conf``: extra Spark settings (``k -> v``) that win
    over mqtool's defaults (``*.extraJavaOptions`` are appended to mqtool's log4j options).
    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    started = SparkContext._active_spark_context is None  # noqa: SLF001 - pyspark's registry
    get_context(master, conf)
    t = time.perf_counter()
    session = SparkSession.builder.config(
        conf=_spark_conf(master or DEFAULT_MASTER, conf)).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    if started:
        _STARTED["session"] = round(time.perf_counter() - t, 3)
    return session


GATEWAY_POLL_SECONDS = 0.005
"""How often the launch looks for the driver JVM's gateway (see :class:`_GatewayClock`)."""


class _GatewayClock:
    """``pyspark.java_gateway``'s ``time`` while :func:`_start_context` launches the JVM:
    pyspark looks for the gateway's connection file every 0.1 s, which rounds every scan's
    start up to the next tenth of a second; with this it looks every
    :data:`GATEWAY_POLL_SECONDS`."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def sleep(seconds: float) -> None:
        time.sleep(min(seconds, GATEWAY_POLL_SECONDS))


def _start_context(spark_conf: Any) -> SparkContext:
    """Launch the driver JVM with its console redirected to :func:`spark_log_path`."""
    from pyspark import SparkContext, java_gateway

    _LOG_DIR.mkdir(parents=True, exist_ok=True)
    log_path = spark_log_path()
    t = time.perf_counter()
    clock = java_gateway.time
    java_gateway.time = _GatewayClock()  # type: ignore[assignment]
    try:
        with open(log_path, "ab") as log:
            gateway = java_gateway.launch_gateway(  # type: ignore[no-untyped-call]
                spark_conf, popen_kwargs={"stdout": log, "stderr": log}
            )
    finally:
        java_gateway.time = clock
    launched = time.perf_counter()
    sc = SparkContext(conf=spark_conf, gateway=gateway)
    _STARTED["jvm"] = round(launched - t, 3)
    _STARTED["context"] = round(time.perf_counter() - launched, 3)
    return sc


@contextmanager
def session_scope(
    master: str | None = None, conf: Mapping[str, str] | None = None, *,
    at_exit: bool = False,
) -> Iterator[SparkSession]:
    """:func:`get_session` for the duration of a block; stops it after only if it started it.

    The driver's log file (:func:`spark_log_path`) is removed after a block that ended
    normally, and kept for a look after one that raised.

    ``at_exit``: for a process that ends with the block (the command line), a block that ended
    normally leaves the stop to the driver JVM: it exits when this process does (its stdin
    closes) and its shutdown hooks stop Spark and delete its temporary directories, while the
    command prints and returns (``spark.stop()`` would add to the CLI's wall time).
    """
    from pyspark import SparkContext

    existed = SparkContext._active_spark_context is not None  # noqa: SLF001
    spark = get_session(master, conf)
    with _stopped_after(spark.sparkContext, existed, at_exit):
        yield spark


@contextmanager
def context_scope(
    master: str | None = None, conf: Mapping[str, str] | None = None, *,
    at_exit: bool = False,
) -> Iterator[SparkContext]:
    """:func:`get_context` for the duration of a block, as :func:`session_scope` (a
    SparkSession made on it meanwhile stops with it)."""
    from pyspark import SparkContext

    existed = SparkContext._active_spark_context is not None  # noqa: SLF001
    sc = get_context(master, conf)
    with _stopped_after(sc, existed, at_exit):
        yield sc


@contextmanager
def _stopped_after(sc: SparkContext, existed: bool, at_exit: bool) -> Iterator[None]:
    ok = False
    try:
        yield
        ok = True
    finally:
        if not existed:
            if not (ok and at_exit):
                from pyspark.sql import SparkSession

                active = SparkSession.getActiveSession()
                (active or sc).stop()
            if ok:
                spark_log_path().unlink(missing_ok=True)


def failure_message(error: BaseException) -> str:
    """One line for a Spark or py4j exception: the innermost cause it names (a Java
    exception's root cause, or the last line of a Python worker's traceback), without the
    stack traces and class names around it."""
    java = getattr(error, "_origin", None) or getattr(error, "java_exception", None)
    if java is not None:  # the JVM's exception: its innermost cause
        try:
            for _ in range(64):
                if java.getCause() is None:
                    break
                java = java.getCause()
            said = str(java.getMessage() or "").strip()
            if said and "Traceback (most recent call last):" not in said:
                return said.splitlines()[0]
        except Exception:  # noqa: BLE001 - the JVM may be gone: read the text instead
            pass
    text = str(error)
    lines = [ln.rstrip() for ln in text.splitlines()]
    if "Traceback (most recent call last):" in text:  # a Python worker's own error
        start = max(i for i, ln in enumerate(lines) if "Traceback (most recent call last):" in ln)
        block = []
        for ln in lines[start + 1:]:
            if ln.startswith("\tat ") or ln.startswith("JVM stacktrace"):
                break
            block.append(ln)
        said = [ln for ln in block if ln and not ln.startswith(" ")]
        if said:
            return said[-1]
    causes = [ln.split("Caused by: ", 1)[1] for ln in lines if ln.startswith("Caused by: ")]
    # py4j: "An error occurred while calling o1.f.", then ": <the Java exception>"
    java_lines = [ln[2:] for ln in lines if ln.startswith(": ") and ln[2:].strip()]
    said = causes[-1] if causes else java_lines[0] if java_lines else next(
        (ln for ln in lines if ln.strip() and not ln.startswith("\tat ")), "")
    head, sep, rest = said.partition(": ")
    if sep and "." in head and " " not in head:  # org.apache.spark.SomeException: message
        said = rest
    return said or type(error).__name__


@contextmanager
def spark_failures(master: str | None = None) -> Iterator[None]:
    """Spark's and py4j's exceptions (a session that cannot start, a job that fails, a master
    that is gone) as one :class:`~mqtool.spark.errors.SparkScanError` line naming the cause
    and the driver's log (:func:`spark_log_path`, kept after a failure).

    A context that Spark stopped on its own (a standalone master that never answered) says
    only that it is stopped: the reason is the last ``Reason:`` in the driver's log."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    from mqtool.spark.errors import SparkScanError

    try:
        yield
    except (PySparkException, Py4JError) as e:
        said, log = failure_message(e), spark_log_path()
        if "stopped SparkContext" in said:
            try:
                reasons = [ln.split("Reason: ", 1)[1].strip() for ln in
                           log.read_text(encoding="utf-8", errors="replace").splitlines()
                           if "Reason: " in ln]
            except OSError:
                reasons = []
            if reasons:
                said = reasons[-1]
        where = f" (--master {master})" if master else ""
        raise SparkScanError(f"Spark{where} failed: {said} (driver log: {log})") from e


def stop_session() -> None:
    """Stop this process's Spark session, if any (the JVM exits with it)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()


@contextmanager
def stage_progress(
    spark: SparkSession | SparkContext, description: str = "scan", *,
    enabled: bool | None = None,
) -> Iterator[None]:
    """Show a rich progress bar on stderr that follows the running Spark stages.

    A daemon thread polls the ``StatusTracker`` every 0.2 s and shows finished / total tasks
    of each active stage; finished stages leave the screen. ``enabled`` defaults to "stderr is
    a terminal" (nothing is drawn into pipes or logs). Nothing is ever written to stdout.
    """
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        yield
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    sc = getattr(spark, "sparkContext", spark)  # a SparkSession's, or the SparkContext
    tracker = sc.statusTracker()
    console = Console(stderr=True)
    stop = threading.Event()
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("tasks"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )

    def poll() -> None:
        tasks: dict[int, Any] = {}
        while not stop.is_set():
            try:
                for stage_id in tracker.getActiveStageIds():
                    info = tracker.getStageInfo(stage_id)
                    if info is None:
                        continue
                    if stage_id not in tasks:
                        tasks[stage_id] = progress.add_task(
                            f"{description}: stage {stage_id}", total=max(info.numTasks, 1)
                        )
                    progress.update(
                        tasks[stage_id], completed=info.numCompletedTasks, total=info.numTasks
                    )
                active = set(tracker.getActiveStageIds())
                for stage_id, task in list(tasks.items()):
                    if stage_id not in active:  # finished (or skipped): off the screen
                        progress.remove_task(task)
                        del tasks[stage_id]
            except Exception:  # noqa: BLE001 - the tracker may vanish while the JVM stops
                return
            time.sleep(0.2)

    thread = threading.Thread(target=poll, name="mqtool-spark-progress", daemon=True)
    with progress:
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=2)
