"""The built wheel and sdist install a working mqtool.

Each is built from this tree (``python -m build``: the sdist, then the wheel from the sdist) and
installed into a fresh virtual environment with pip, and run from a directory outside the source
tree: ``--version``, every command's ``--help``, ``demo``, ``verify``, ``trace``, ``dlq list`` and
a ``scan`` of the demo store. The wheel is installed with its dependencies; pip builds and
installs the sdist without them, and its environment reads the wheel environment's packages for
the dependencies (a ``.pth`` file): mqtool itself runs from the sdist's install. The sdist must
also install the same files as the wheel, byte for byte (the hashes pip records), the same
metadata (so the same dependencies) and the same ``mqtool`` command. The editable install every
other test uses would hide a package or a data file the wheel leaves out.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from mqtool import __version__

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

#: Package directories of the fixed layout and the names they install as.
ROOTS = {"mqtool": "mqtool", "formats": "mqtool/formats", "spark": "mqtool/spark"}


def _packages() -> set[str]:
    """Every package of the tree (a directory with __init__.py), as installed paths."""
    out = set()
    for src, dst in ROOTS.items():
        for init in (REPO / src).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / src).as_posix()
            out.add(dst if rel == "." else f"{dst}/{rel}")
    return out


def _commands() -> list[list[str]]:
    from mqtool.cli import app, command_paths

    return command_paths(app)


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("dist")
    run = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(REPO)],
                         capture_output=True, text=True, timeout=1200, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    wheels, sdists = list(out.glob("*.whl")), list(out.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, list(out.iterdir())
    return {"wheel": wheels[0], "sdist": sdists[0]}


def test_the_wheel_holds_every_package_and_data_file(dist: dict[str, Path]) -> None:
    names = set(zipfile.ZipFile(dist["wheel"]).namelist())
    dirs = {n.rsplit("/", 1)[0] for n in names if n.endswith("/__init__.py")}
    assert _packages() == dirs, (_packages() ^ dirs)
    for data in ("mqtool/py.typed", "mqtool/formats/py.typed", "mqtool/spark/py.typed",
                 "mqtool/spark/log4j2.properties", "mqtool/spark/jars/mqtool-spark.jar"):
        assert data in names, data
    java = {n.rsplit("/", 1)[1] for n in names if n.endswith(".java")}
    assert java == {p.name for p in (REPO / "spark" / "java").rglob("*.java")}
    assert not [n for n in names if n.endswith(".jsa")]  # the class-data archive is per JDK
    sdist = tarfile.open(dist["sdist"]).getnames()
    assert any(n.endswith("/setup.py") for n in sdist)
    assert any(n.endswith("spark/jars/mqtool-spark.jar") for n in sdist)


def _install(package: Path, venv: Path, *pip_args: str) -> Path:
    """A fresh virtual environment ``venv`` with ``package`` installed by pip."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    run = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
         "-q", "--no-compile", *pip_args, str(package)],
        capture_output=True, text=True, timeout=1800, check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return venv


@pytest.fixture(scope="module")
def wheel_venv(dist: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel installed (its dependencies from the package
    index, pip's cache warm)."""
    return _install(dist["wheel"], tmp_path_factory.mktemp("venv-wheel") / "venv")


@pytest.fixture(scope="module")
def sdist_venv(dist: dict[str, Path], wheel_venv: Path,
               tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the sdist built and installed by pip, without its
    dependencies: a ``.pth`` file gives it the wheel environment's packages (after its own,
    so its mqtool is the sdist's)."""
    venv = _install(dist["sdist"], tmp_path_factory.mktemp("venv-sdist") / "venv", "--no-deps")
    [own] = venv.glob("lib/python*/site-packages")
    [deps] = wheel_venv.glob("lib/python*/site-packages")
    (own / "wheel-dependencies.pth").write_text(f"{deps}\n", "utf-8")
    return venv


@pytest.fixture(scope="module", params=["wheel", "sdist"])
def installed(request: pytest.FixtureRequest) -> Path:
    """The wheel's or the sdist's environment."""
    return Path(request.getfixturevalue(f"{request.param}_venv"))


def _installed_files(venv: Path) -> tuple[dict[str, str], dict[str, str]]:
    """What pip installed of mqtool into ``venv``: each file under site-packages with the hash
    pip recorded for it, and each script of ``bin/`` with the venv's own path taken out."""
    [record] = venv.glob("lib/python*/site-packages/mqtool-*.dist-info/RECORD")
    files, scripts = {}, {}
    for row in record.read_text("utf-8").splitlines():
        path, digest, _size = row.rsplit(",", 2)
        if path.startswith("../"):
            script = (record.parents[1] / path).resolve()
            assert script.parent == venv.resolve() / "bin", path
            scripts[script.name] = script.read_text("utf-8").replace(str(venv), "VENV")
        elif not path.endswith((".dist-info/RECORD", ".dist-info/direct_url.json")):
            assert digest.startswith("sha256="), row
            files[path] = digest
    return files, scripts


def test_the_sdist_installs_what_the_wheel_installs(sdist_venv: Path, wheel_venv: Path) -> None:
    """pip builds the sdist and installs the same files, metadata and ``mqtool`` command as
    the wheel's."""
    files, scripts = _installed_files(sdist_venv)
    want_files, want_scripts = _installed_files(wheel_venv)
    assert files == want_files, sorted(set(files.items()) ^ set(want_files.items()))
    assert scripts == want_scripts and "mqtool" in scripts, (scripts, want_scripts)
    assert any(p.endswith(".dist-info/METADATA") for p in files), sorted(files)
    assert {"mqtool/__init__.py", "mqtool/formats/__init__.py",
            "mqtool/spark/jars/mqtool-spark.jar"} <= set(files), sorted(files)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    env["XDG_CACHE_HOME"] = str(home / "cache")
    env["XDG_STATE_HOME"] = str(home / "state")
    env["NO_COLOR"] = "1"
    return env


def test_installed_mqtool_runs_outside_the_source_tree(installed: Path, tmp_path: Path) -> None:
    env = _env(tmp_path)
    work = tmp_path / "work"
    work.mkdir()

    def run(*args: str, code: int = 0, timeout: float = 600,
            extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        res = subprocess.run([str(installed / "bin" / "mqtool"), *args], cwd=work,
                             env={**env, **(extra or {})}, capture_output=True, text=True,
                             timeout=timeout, check=False)
        assert res.returncode == code, (args, res.returncode, res.stdout[-2000:],
                                        res.stderr[-2000:])
        return res

    where = subprocess.run(
        [str(installed / "bin" / "python"), "-c",
         "import mqtool, mqtool.spark.session as s; print(mqtool.__file__); "
         "print(s.java_reader_jar())"],
        cwd=work, env=env, capture_output=True, text=True, check=True).stdout.split()
    assert Path(where[0]).is_relative_to(installed), where
    assert Path(where[1]).is_relative_to(installed), where  # the wheel's own jar
    assert run("--version").stdout.strip() == f"mqtool {__version__}"
    for path in _commands():
        res = run(*path, "--help")
        assert "Usage: mqtool" in res.stdout, path
    run("demo", "demo-store")
    run("verify", "demo-store")
    # the record kernels were compiled by the first run and cached where this install can
    # write: a second run loads them and compiles nothing
    second = run("verify", "demo-store", extra={"NUMBA_DEBUG_CACHE": "1"})
    assert "[cache] data loaded" in second.stdout
    assert "[cache] data saved" not in second.stdout
    run("trace", "demo-store", "--key", "demo-dlq-0")
    run("dlq", "list", "demo-store")
    scan = run("scan", "demo-store", "--master", "local[2]", "--json")
    assert '"integrity": []' in scan.stdout
