"""Compiling mqtool's Java reader for Spark (``spark/java``) into ``mqtool-spark.jar``.

The one place that runs ``javac``: ``make dev`` (``python -m mqtool.spark.javabuild OUT``),
the wheel build (``setup.py`` loads this file by path, before mqtool is installed) and a scan
that finds no jar (:func:`mqtool.spark.session.java_reader_jar` compiles one into the user's
cache once) all call :func:`compile_jar`. The sources compile against the jars pyspark ships
(Spark's DataSource V2 and columnar APIs), for Java 17, the oldest Java Spark 4 runs on.

Standard library only: ``setup.py`` runs this module in a build environment without mqtool.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

JAVA_DIR = Path(__file__).resolve().with_name("java")
"""The Java sources (package ``mqtool.spark``), shipped with the Python package."""

JAR_NAME = "mqtool-spark.jar"
JAVA_RELEASE = "17"


class JavaBuildError(Exception):
    """The jar could not be built (no JDK, no pyspark, or javac failed): says why in one line."""


def java_sources(java_dir: Path = JAVA_DIR) -> list[Path]:
    return sorted(java_dir.rglob("*.java"))


def sources_digest(java_dir: Path = JAVA_DIR) -> str:
    """A short hash of the Java sources (names and bytes): a cached jar is keyed by it."""
    h = hashlib.sha256()
    for p in java_sources(java_dir):
        h.update(p.relative_to(java_dir).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def pyspark_jars() -> Path | None:
    """The ``jars/`` directory of the pyspark this interpreter would import (pyspark itself is
    not imported), or None."""
    try:
        spec = importlib.util.find_spec("pyspark")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        jars = Path(loc) / "jars"
        if jars.is_dir():
            return jars
    return None


def jdk_tools() -> tuple[str, str] | None:
    """``javac`` and ``jar`` (from ``JAVA_HOME`` when set, else the PATH), or None."""
    home = os.environ.get("JAVA_HOME")
    found = []
    for tool in ("javac", "jar"):
        path = None
        if home and (Path(home) / "bin" / tool).is_file():
            path = str(Path(home) / "bin" / tool)
        path = path or shutil.which(tool)
        if path is None:
            return None
        found.append(path)
    return found[0], found[1]


def compile_jar(out: Path, spark_jars: Path | None = None, java_dir: Path = JAVA_DIR) -> Path:
    """Compile the sources of ``java_dir`` into the jar ``out`` (written whole, then renamed
    into place); ``spark_jars``: the directory of Spark's jars (default: pyspark's)."""
    tools = jdk_tools()
    if tools is None:
        raise JavaBuildError("no JDK (javac and jar) on the PATH or in JAVA_HOME")
    jars = spark_jars or pyspark_jars()
    if jars is None:
        raise JavaBuildError("pyspark is not installed: its jars are the compile class path")
    sources = java_sources(java_dir)
    if not sources:
        raise JavaBuildError(f"no Java sources under {java_dir}")
    javac, jar = tools
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mqtool-javac-") as tmp:
        classes = Path(tmp) / "classes"
        classes.mkdir()
        run = subprocess.run(
            [javac, "-nowarn", "--release", JAVA_RELEASE, "-cp", f"{jars}/*", "-d",
             str(classes), *map(str, sources)],
            capture_output=True, text=True, check=False,
        )
        if run.returncode != 0:
            last = (run.stderr.strip().splitlines() or ["?"])[0]
            raise JavaBuildError(f"javac exited {run.returncode}: {last}")
        staged = Path(tmp) / JAR_NAME
        run = subprocess.run([jar, "cf", str(staged), "-C", str(classes), "."],
                             capture_output=True, text=True, check=False)
        if run.returncode != 0:
            raise JavaBuildError(f"jar exited {run.returncode}: {run.stderr.strip()[:200]}")
        part = out.with_name(f".{out.name}.{os.getpid()}.part")
        shutil.copyfile(staged, part)
        os.replace(part, out)
    return out


def main(argv: list[str]) -> int:
    """``python -m mqtool.spark.javabuild OUT``: build the jar at OUT; without a JDK, say so
    and exit 0 (the scan then reads the commitlog with its Python data source)."""
    out = Path(argv[0]) if argv else JAVA_DIR.parent / "jars" / JAR_NAME
    try:
        compile_jar(out)
    except JavaBuildError as e:
        print(f"no {JAR_NAME}: {e}; mqtool scan reads the commitlog with its Python data "
              "source only", file=sys.stderr)
        return 0
    print(f"built {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
