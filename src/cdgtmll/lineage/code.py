"""Which code a job runs, as data: the input that makes a code change re-run its jobs.

A job's **code identity** is the sha256 over

* the source of every module in the *static import closure* of the job's entry modules
  (:func:`closure`): each module's ``import`` / ``from ... import`` statements, wherever they
  stand (module level or inside a function: a lazy import is still code the job may run),
  ``importlib.import_module("<literal>")``, and a built-in loss named by a literal
  (``build_loss("bce", ...)``); a package's ``__init__`` counts whenever a module under it is
  imported, as Python runs it;
* the lock file ``requirements.lock`` beside the package (the library versions the job runs
  with); ``null`` where the package is installed without its checkout.

Entry modules (:func:`job_roots`): the job's command module (``cdgtmll.train``,
``cdgtmll.metrics.evaluate_run``, ``cdgtmll.tables.build``, ...) and, for a training job, the
module that defines its method and the module of the loss it trains with
(``resolved_hparams.loss``; built-in loss ``name`` lives in ``cdgtmll.nn.losses.<name>``).
The registries import their other members by name at run time (methods, losses); the closure
does not follow those, so editing one loss re-plans the jobs of the methods that train with
that loss and nothing else. A plugin's module (config ``plugins``) is followed like a package
module, with the imports that stay inside its own top-level package.

Snakemake gets each job's identity as a ``params`` entry (``workflow/rules/*.smk``): a changed
identity re-runs that job and everything downstream of it (the ``params`` rerun trigger). Each
job records its identity with the list of modules and their hashes (``provenance.json`` ->
``code``; ``metrics.json`` -> ``code``; ``*.sources.json`` -> ``code``), and
``cdgtmll audit`` recomputes it from the code on disk (:func:`cdgtmll.lineage.audit`).

Planning cost: finding a module's imports means parsing it (``ast``); within one process the
result is kept per (path, size, mtime), and so is each file's hash. Parsing the closures of the
default profile's planning process costs about 0.4 s of CPU (0.48 s, against 0.09 s with the
imports read from a file: ``benchmarks/bench_runtime_workarounds.py --only index``,
docs/benchmarks.md, "Run-time workarounds"), too little to keep a cache of them on disk.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from cdgtmll.config.run_spec import RunSpec

PACKAGE = Path(__file__).resolve().parents[1]
ROOT_PACKAGE = PACKAGE.name  # "cdgtmll"
LOCK_FILE = PACKAGE.parents[1] / "requirements.lock"
LOSS_PACKAGE = f"{ROOT_PACKAGE}.nn.losses"
#: calls whose first argument, a string literal, names a built-in loss
LOSS_CALLS = frozenset({"build_loss", "loss_class", "loss_hparam_space"})


@functools.lru_cache(maxsize=256)
def _top_location(top: str) -> tuple[Path | None, bool]:
    """(folder of package ``top`` or file of module ``top``, is a package), found without importing it."""
    if top == ROOT_PACKAGE:
        return PACKAGE, True
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None, False
    if spec is None:
        return None, False
    if spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0]), True
    origin = spec.origin
    return (Path(origin), False) if origin and origin.endswith(".py") else (None, False)


def module_file(module: str) -> Path | None:
    """The source file of ``module`` without importing it (``None``: not a source module)."""
    parts = module.split(".")
    where, is_package = _top_location(parts[0])
    if where is None:
        return None
    if not is_package:
        return where if len(parts) == 1 else None
    base = where.joinpath(*parts[1:])
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def _resolve(module: str, level: int, name: str | None, is_package: bool) -> str | None:
    if level == 0:
        return name
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else [])) or None


def parse_imports(source: bytes, path: str, module: str) -> tuple[str, ...]:
    """Modules named by the imports of one source file (``module``'s bytes ``source``)."""
    tree = ast.parse(source, filename=path)
    is_package = Path(path).name == "__init__.py"
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node.level, node.module, is_package)
            if target:
                found.append(target)
                found.extend(f"{target}.{a.name}" for a in node.names if a.name != "*")
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            arg = node.args[0].value
            fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if not isinstance(arg, str):
                continue
            if fn == "import_module":
                found.append(arg)
            elif fn in LOSS_CALLS:
                found.append(f"{LOSS_PACKAGE}.{arg}")
    return tuple(dict.fromkeys(found))


@functools.lru_cache(maxsize=4096)
def _imports(path: str, size: int, mtime_ns: int, module: str) -> tuple[str, ...]:
    """Modules named by the imports of one source file (cached per process on path, size and mtime)."""
    return parse_imports(Path(path).read_bytes(), path, module)


def _with_parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def closure(roots: Iterable[str]) -> dict[str, Path]:
    """Every source module the ``roots`` import, transitively (module name -> file), restricted
    to the roots' own top-level packages (``cdgtmll`` and a plugin's package)."""
    roots = [r for r in roots if r]
    tops = {ROOT_PACKAGE} | {r.split(".")[0] for r in roots}
    seen: dict[str, Path] = {}
    checked: set[str] = set()  # names looked up: a module, or an imported name that is none
    todo = [p for r in roots for p in _with_parents(r)]
    while todo:
        mod = todo.pop()
        if mod in checked or mod.split(".")[0] not in tops:
            continue
        checked.add(mod)
        path = module_file(mod)
        if path is None:
            continue
        seen[mod] = path
        st = path.stat()
        for name in _imports(str(path), st.st_size, st.st_mtime_ns, mod):
            todo.extend(p for p in _with_parents(name) if p not in checked)
    return dict(sorted(seen.items()))


@functools.lru_cache(maxsize=4096)
def _file_sha(path: str, size: int, mtime_ns: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def file_sha256(path: Path) -> str:
    st = path.stat()
    return _file_sha(str(path), st.st_size, st.st_mtime_ns)


def lock_sha256() -> str | None:
    return file_sha256(LOCK_FILE) if LOCK_FILE.is_file() else None


def identity(roots: Iterable[str]) -> dict[str, Any]:
    """``{"sha256", "roots", "modules": {module: sha256}, "lock_sha256"}`` of the given entry modules."""
    roots = list(dict.fromkeys(r for r in roots if r))
    mods = {m: file_sha256(p) for m, p in closure(roots).items()}
    lock = lock_sha256()
    h = hashlib.sha256(b"cdgtmll-code-identity/1\n")
    for m, s in mods.items():
        h.update(f"{m} {s}\n".encode())
    h.update(f"lock {lock}\n".encode())
    return {"sha256": h.hexdigest(), "roots": roots, "modules": mods, "lock_sha256": lock}


def method_module(method: str) -> str | None:
    """The module that defines registered method ``method`` (its spec's ``impl``: no import), or None."""
    from cdgtmll.methods import base

    spec = base.registered().get(method)
    return spec.module if spec is not None else None


def train_roots(spec: RunSpec) -> list[str]:
    """Entry modules of a training job: the trainer, the method's module and its loss's module."""
    roots = [f"{ROOT_PACKAGE}.train", method_module(spec.registered)]
    loss = (spec.resolved_hparams or {}).get("loss")
    if isinstance(loss, str):
        roots.append(f"{LOSS_PACKAGE}.{loss}" if module_file(f"{LOSS_PACKAGE}.{loss}") else _plugin_loss_module(loss))
    return [r for r in roots if r]


def _plugin_loss_module(name: str) -> str | None:
    if "torch" not in sys.modules:  # a plugin loss is registered only once its module was imported
        return None
    from cdgtmll.nn.losses.registry import loss_module

    return loss_module(name)


def changed_modules(recorded: dict[str, str], current: dict[str, str]) -> list[str]:
    """Modules added, removed or edited between two ``modules`` maps, sorted."""
    return sorted(m for m in set(recorded) | set(current) if recorded.get(m) != current.get(m))


def main(argv: list[str] | None = None) -> int:
    """``python -m cdgtmll.lineage.code MODULE...``: print the identity of these entry modules."""
    print(json.dumps(identity(argv if argv is not None else sys.argv[1:]), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
