"""The package's import graph: no cycles among cdgtmll modules, cdgtmll.nn (the shared
neural code) never imports cdgtmll.data (the data pipeline, which may use nn), and the
workarounds in cdgtmll.runtime import no other cdgtmll module.

The graph is read from the source (AST), not from ``sys.modules``, so imports inside
functions (lazy imports) count as well as module-level ones, and so do
``importlib.import_module(...)`` calls (a literal name; a variable counts as every
cdgtmll module name written as a string in that file, as in the method registry's loop)."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import cdgtmll

SRC = Path(cdgtmll.__file__).resolve().parent


def module_name(path: Path, root: Path = SRC) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path = SRC) -> dict[str, set[str]]:
    """``{module: {cdgtmll modules it imports anywhere in its source}}``. ``from pkg import
    x`` is an edge to ``pkg.x`` when that is a module, else to ``pkg``."""
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {m: set() for m in files}

    def known(name: str | None) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    for mod, path in files.items():
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative import
                    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    pkg = ".".join(base + ([node.module] if node.module else []))
                else:
                    pkg = node.module or ""
                targets = [f"{pkg}.{a.name}" if f"{pkg}.{a.name}" in files else pkg for a in node.names]
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module":
                arg = node.args[0] if node.args else None
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    targets = [arg.value]
                else:  # import_module(name) in a loop: every module name written in this file
                    targets = [c.value for c in ast.walk(tree) if isinstance(c, ast.Constant) and c.value in files]
            for t in targets:
                t = known(t) if t.startswith("cdgtmll") else None
                if t and t != mod:
                    graph[mod].add(t)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, each module importing the next (first = last), or None."""
    try:  # graph[m] = what m imports = m's predecessors in an import order
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return list(reversed(exc.args[1]))  # graphlib lists each predecessor before its successor
    return None


def test_the_graph_sees_lazy_and_registry_imports():
    g = import_graph()
    assert len(g) > 50
    assert "cdgtmll.nn.trainer" in g["cdgtmll.methods.neural"]
    # function-level import: cdgtmll.train imports the image input only for image rows
    assert "cdgtmll.images.trainer_input" in g["cdgtmll.train"]
    # the registry's specs: imported by every module that builds a method
    assert "cdgtmll.methods.builtin" in g["cdgtmll.methods.base"]


def test_cycle_detection_on_a_known_cycle(tmp_path):
    pkg = tmp_path / "cdgtmll"
    (pkg / "nn").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "nn" / "__init__.py").write_text("")
    (pkg / "nn" / "a.py").write_text("from cdgtmll.nn import b\n")
    (pkg / "nn" / "b.py").write_text("def f():\n    from cdgtmll.nn.a import x\n")
    g = import_graph(pkg)
    assert g["cdgtmll.nn.a"] == {"cdgtmll.nn.b"} and g["cdgtmll.nn.b"] == {"cdgtmll.nn.a"}
    cyc = find_cycle(g)
    assert cyc is not None and set(cyc) == {"cdgtmll.nn.a", "cdgtmll.nn.b"}


def test_no_import_cycles():
    cyc = find_cycle(import_graph())
    assert cyc is None, "import cycle (each imports the next): " + " -> ".join(cyc)


def test_nn_does_not_import_data():
    bad = sorted((m, t) for m, ts in import_graph().items() if m.startswith("cdgtmll.nn")
                 for t in ts if t == "cdgtmll.data" or t.startswith("cdgtmll.data."))
    assert not bad, f"cdgtmll.nn imports cdgtmll.data: {bad}"


def test_runtime_workarounds_import_no_other_cdgtmll_module():
    """cdgtmll.runtime holds workarounds for dependencies: each stands alone, so that removing
    one when its dependency is fixed touches only the modules that apply it."""
    bad = sorted((m, t) for m, ts in import_graph().items() if m.startswith("cdgtmll.runtime")
                 for t in ts if not t.startswith("cdgtmll.runtime"))
    assert not bad, f"cdgtmll.runtime imports other cdgtmll modules: {bad}"
