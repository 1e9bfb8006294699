"""Dependencies point one way: mqtool.spark -> mqtool -> mqtool.formats.

Layers (docs/ARCHITECTURE.md): ``formats`` imports nothing of the project but ``formats``;
the write engine ``mqtool.refstore`` imports only ``formats``; read features (store, inspect,
trace, dlq selection, verify) never import a write path; ``mqtool`` reaches ``spark`` only
through the CLI's lazy scan entry.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print('\\n'.join(sys.modules))"],
        capture_output=True, text=True, check=True,
    ).stdout
    return set(out.split())


def test_formats_imports_nothing_else_of_the_project() -> None:
    mods = _modules_after(
        "import mqtool.formats, mqtool.formats.commitlog, mqtool.formats.consumequeue, "
        "mqtool.formats.indexfile, mqtool.formats.msgid, mqtool.formats.config, "
        "mqtool.formats.checkpoint, mqtool.formats.timer, mqtool.formats.rules, "
        "mqtool.formats.javacompat, mqtool.formats.encoder, mqtool.formats.batchcq"
    )
    assert not {m for m in mods if m.split(".")[0] in ("rich", "pyspark", "typer", "pyarrow")}
    project = {m for m in mods if m.startswith("mqtool")}
    assert project <= {m for m in project if m == "mqtool" or m.startswith("mqtool.formats")}


def test_cli_help_does_not_import_pyspark() -> None:
    mods = _modules_after(
        "import sys; sys.argv=['mqtool','--help']\n"
        "from mqtool.cli import app\n"
        "try:\n    app()\nexcept SystemExit:\n    pass"
    )
    assert "pyspark" not in mods
    assert "mqtool.cli" in mods


def test_python_dash_m_runs() -> None:
    res = subprocess.run([sys.executable, "-m", "mqtool", "--help"], capture_output=True,
                         text=True)
    assert res.returncode == 0
    assert "inspect" in res.stdout


# -- layers, checked on the source (every import, lazy ones included) --------------------------

ROOT = Path(__file__).resolve().parents[2]

#: Read features: they never import the write engine (mqtool.refstore) nor a writer.
READ_FEATURES = (
    "mqtool/store/*.py", "mqtool/overview.py", "mqtool/query.py",
    "mqtool/jsonview.py", "mqtool/trace/*.py", "mqtool/dlq/selection.py",
    "mqtool/integrity/checks.py", "mqtool/integrity/dispatch_rules.py",
    "mqtool/integrity/meta.py", "mqtool/integrity/commitlog_pass.py", "mqtool/integrity/queues.py",
    "mqtool/integrity/indexcheck.py", "mqtool/integrity/recovery.py",
    "mqtool/cli/inspect_cmd.py", "mqtool/cli/read.py", "mqtool/cli/trace.py",
)


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports (module level and inside functions), absolute names."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    pkg = ".".join(("mqtool",) + path.relative_to(ROOT).with_suffix("").parts[:-1])
    pkg = pkg.replace("mqtool.mqtool", "mqtool")
    if path.relative_to(ROOT).parts[0] in ("formats", "spark"):
        pkg = "mqtool." + ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
    return out


def _files(*patterns: str) -> list[Path]:
    found = sorted({p for pat in patterns for p in ROOT.glob(pat)})
    assert found, patterns
    return found


def _offenders(files: list[Path], bad: tuple[str, ...], allowed: tuple[str, ...] = ()) -> list:
    return sorted(
        (str(f.relative_to(ROOT)), m)
        for f in files for m in _imports(f)
        if any(m == b or m.startswith(b + ".") for b in bad)
        and not any(m == a or m.startswith(a + ".") for a in allowed)
    )


def test_formats_source_imports_only_formats() -> None:
    assert _offenders(_files("formats/**/*.py"), ("mqtool",), ("mqtool.formats",)) == []


def test_read_features_never_import_the_write_engine() -> None:
    files = [p for pat in READ_FEATURES for p in ROOT.glob(pat)]
    assert len(files) >= 8
    bad = ("mqtool.refstore", "mqtool.dlq.resend", "mqtool.dlq.targets", "mqtool.dlq.journal",
           "mqtool.integrity.repair", "mqtool.serve")
    assert _offenders(files, bad) == []


def test_refstore_never_imports_the_read_side_or_features() -> None:
    bad = ("mqtool.store", "mqtool.overview", "mqtool.trace", "mqtool.dlq", "mqtool.query",
           "mqtool.jsonview", "mqtool.cli", "mqtool.spark", "mqtool.serve", "mqtool.integrity",
           "mqtool.report", "mqtool.remoting")
    assert _offenders(_files("mqtool/refstore/*.py"), bad) == []


def test_mqtool_imports_spark_only_through_the_cli_scan_entry() -> None:
    files = [f for f in _files("mqtool/**/*.py") if f != ROOT / "mqtool" / "cli" / "scan.py"]
    assert _offenders(files, ("mqtool.spark", "pyspark")) == []


def test_spark_imports_no_feature_or_writer() -> None:
    bad = ("mqtool.refstore", "mqtool.cli", "mqtool.serve", "mqtool.dlq", "mqtool.trace",
           "mqtool.integrity.repair", "mqtool.report")
    assert _offenders(_files("spark/**/*.py"), bad) == []


def test_read_features_do_not_load_the_write_engine_at_import() -> None:
    mods = _modules_after(
        "import mqtool.store, mqtool.overview, mqtool.trace, mqtool.query, mqtool.jsonview"
    )
    assert not {m for m in mods if m.startswith("mqtool.refstore")}


# -- the import graph: no cycles, no private names across modules, no library module importing
# the CLI ----------------------------------------------------------------------------------------

def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    if parts[0] in ("formats", "spark"):
        parts = ["mqtool", *parts]
    return ".".join(parts)


def _import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (module level and inside functions)."""
    files = _files("mqtool/**/*.py", "formats/**/*.py", "spark/**/*.py")
    names = {_module_name(f): f for f in files}
    graph: dict[str, set[str]] = {}
    for name, f in names.items():
        out = set()
        for m in _imports(f):
            while m and m not in names and "." in m:
                m = m.rsplit(".", 1)[0]
            # a package importing its own submodule, or a module its package, is no cycle
            if m in names and m != name and not m.startswith(name + ".") \
                    and not name.startswith(m + "."):
                out.add(m)
        graph[name] = out
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(comp)

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles() -> None:
    assert _cycles(_import_graph()) == []


def test_library_never_imports_the_cli() -> None:
    graph = _import_graph()
    users = {m for m, deps in graph.items() if not m.startswith("mqtool.cli")
             and m != "mqtool.__main__" and any(d.split(".")[:2] == ["mqtool", "cli"]
                                                for d in deps)}
    assert users == set()


def _private_imports() -> list[str]:
    """``module <- source.name`` for every ``_name`` (not ``__dunder__``) a module imports from
    another module that is not its own submodule."""
    files = _files("mqtool/**/*.py", "formats/**/*.py", "spark/**/*.py")
    names = {_module_name(f): f for f in files}
    out = []
    for name, f in names.items():
        is_pkg = f.name == "__init__.py"
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"), str(f))):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = node.module or ""
            if node.level:
                here = name.split(".") if is_pkg else name.split(".")[:-1]
                here = here[: len(here) - (node.level - 1)]
                base = ".".join(here + ([base] if base else []))
            for a in node.names:
                src = f"{base}.{a.name}" if f"{base}.{a.name}" in names else base
                while src and src not in names and "." in src:
                    src = src.rsplit(".", 1)[0]
                private = a.name.startswith("_") and not a.name.startswith("__")
                if private and src != name and not src.startswith(name + "."):
                    out.append(f"{name} <- {src}.{a.name}")
    return sorted(out)


def test_no_private_name_is_imported_across_modules() -> None:
    assert _private_imports() == []

