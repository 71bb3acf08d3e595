"""The package's shape: a folder per concern, no facades.

* no module imports a ``cdgtmll`` name only to hand it on (a re-export): every name a module
  imports from ``cdgtmll`` is used in that module, and no module has an ``__all__`` listing
  names it did not define. Callers import each name from the module that defines it;
* no module in a folder shares its first word (the part before ``_``) with two or more
  siblings: three modules ``tables_*`` beside each other are a package that is not a folder;
* the top level of ``cdgtmll`` holds few modules; the rest live in packages.

The source is read as text (AST), so a lazy import inside a function counts like any other.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import cdgtmll

SRC = Path(cdgtmll.__file__).resolve().parent
MAX_TOP_LEVEL_MODULES = 15


def _modules(root: Path = SRC) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def reexports(path: Path) -> list[str]:
    """Names ``path`` imports from a ``cdgtmll`` module and never uses itself, plus names in an
    ``__all__`` that the module does not define."""
    tree = ast.parse(path.read_text(), str(path))
    imported: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("cdgtmll")):
            for a in node.names:
                imported[a.asname or a.name] = node.lineno
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    used |= {n.value.id for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
    # names used only inside string annotations (``from __future__ import annotations``)
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.isidentifier():
            used.add(n.value)
    bad = [f"{name} (line {line})" for name, line in imported.items() if name not in used]
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))}
    for n in tree.body:
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AnnAssign) else []
        defined |= {x.id for t in targets for x in ast.walk(t) if isinstance(x, ast.Name)}
    for n in tree.body:
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets):
            names = [e.value for e in getattr(n.value, "elts", []) if isinstance(e, ast.Constant)]
            bad += [f"{x} (in __all__, defined elsewhere)" for x in names if x not in defined]
    return bad


def prefix_groups(folder: Path) -> dict[str, list[str]]:
    """First word -> the modules and sub-packages of ``folder`` that start with it (only words
    shared by three or more)."""
    names = [p.stem for p in folder.glob("*.py") if p.stem != "__init__"]
    names += [d.name for d in folder.iterdir() if d.is_dir() and (d / "__init__.py").is_file()]
    groups: dict[str, list[str]] = defaultdict(list)
    for n in names:
        groups[n.split("_")[0]].append(n)
    return {k: sorted(v) for k, v in groups.items() if len(v) >= 3}


def test_reexport_detection_on_a_known_facade(tmp_path):
    facade = tmp_path / "facade.py"
    facade.write_text("from cdgtmll.io import atomic_write, sha256_file\n\n"
                      "def h(p):\n    return sha256_file(p)\n")
    assert reexports(facade) == ["atomic_write (line 1)"]
    facade.write_text("from cdgtmll.io import sha256_file\n__all__ = ['sha256_file']\n")
    assert reexports(facade) == ["sha256_file (in __all__, defined elsewhere)"]


def test_no_module_reexports_names_it_does_not_define():
    bad = {str(p.relative_to(SRC)): r for p in _modules() if (r := reexports(p))}
    assert not bad, f"modules that re-export cdgtmll names (import them where they are defined): {bad}"


def test_prefix_detection_on_a_known_flat_package(tmp_path):
    for n in ("tables", "tables_data", "tables_layout", "tables_notes", "metrics", "io"):
        (tmp_path / f"{n}.py").write_text("")
    assert prefix_groups(tmp_path) == {"tables": ["tables", "tables_data", "tables_layout", "tables_notes"]}


def test_no_package_hides_in_file_name_prefixes():
    folders = [SRC] + sorted(d for d in SRC.rglob("*") if d.is_dir() and (d / "__init__.py").is_file())
    bad = {str(f.relative_to(SRC.parent)): g for f in folders if (g := prefix_groups(f))}
    assert not bad, f"modules sharing a prefix with two or more siblings (make them a package): {bad}"


def test_few_top_level_modules():
    top = sorted(p.stem for p in SRC.glob("*.py") if p.stem != "__init__")
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top
