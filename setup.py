"""What pyproject.toml cannot say: the packages of the fixed layout, and the Spark reader's jar.

- Packages are found, not listed: every package under ``mqtool/``, ``formats/`` (installed as
  ``mqtool.formats``) and ``spark/`` (installed as ``mqtool.spark``).
- ``mqtool/spark/jars/mqtool-spark.jar`` goes into the wheel: the one ``make dev`` built when it
  is newer than every Java source, else one compiled here by ``spark/javabuild.py`` when this
  build environment has a JDK and pyspark. Without either the wheel has no jar and says so; a
  scan then compiles it into the user's cache on first use (JDK needed), or reads the commitlog
  with the Python data source.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
ROOTS = {"mqtool": "mqtool", "mqtool.formats": "formats", "mqtool.spark": "spark"}
JAR = Path("spark") / "jars" / "mqtool-spark.jar"


def packages() -> list[str]:
    found = []
    for pkg, where in ROOTS.items():
        found.append(pkg)
        found += [f"{pkg}.{sub}" for sub in find_packages(str(HERE / where))
                  if f"{pkg}.{sub}" not in ROOTS]
    return sorted(found)


def _javabuild():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("mqtool_javabuild", HERE / "spark" /
                                                  "javabuild.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _fresh_jar() -> Path | None:
    """The jar of the source tree when no Java source is newer than it."""
    jar = HERE / JAR
    if not jar.is_file():
        return None
    sources = list((HERE / "spark" / "java").rglob("*.java"))
    if any(s.stat().st_mtime > jar.stat().st_mtime for s in sources):
        return None
    return jar


class BuildWithJar(build_py):  # type: ignore[misc]
    """build_py, then the Spark reader's jar into the built ``mqtool/spark/jars/``."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):  # make dev builds the jar in the tree
            return
        target = Path(self.build_lib) / "mqtool" / "spark" / "jars" / JAR.name
        jar = _fresh_jar()
        if jar is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(jar, target)
            return
        jb = _javabuild()
        try:
            jb.compile_jar(target)
        except jb.JavaBuildError as e:
            print(f"warning: the wheel has no {JAR.name} ({e}); mqtool scan compiles it on "
                  "first use when a JDK is there", file=sys.stderr)


setup(packages=packages(), package_dir=ROOTS, cmdclass={"build_py": BuildWithJar})
