"""The docs name what exists: every ``cdgtmll.<module>[.<name>]`` and every repository path in
the inline code and code blocks of README.md, config/README.md and docs/*.md resolves, every key
of the config schema is described in config/README.md, and the README's job counts are the
measured ones. Comments and docstrings of the code explain it: none cites one of our issues
(that history is CHANGELOG.md's, kept in versions and sections).

Names are resolved without importing anything: a module is a file under ``src/`` and a name is a
top-level definition (``def``, ``class``, assignment) of that module's source, or a member of
such a class, found by parsing it. Each checker also runs on a temporary page or file, to show
that it rejects a stale name, path, key or comment.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest
import yaml

from tests.support.paths import ROOT
from tests.support.tools import load_tool

PAGES = sorted([ROOT / "README.md", ROOT / "config" / "README.md", *(ROOT / "docs").glob("*.md")])
SRC = ROOT / "src"
SCHEMA = SRC / "cdgtmll" / "config" / "schema.yaml"
#: top-level folders whose paths the docs name; a path starting with one of them must exist
TOPS = ("src/", "tools/", "tests/", "config/", "workflow/", "benchmarks/", "profiles/", "docs/",
        "mk/", ".ci/")
#: files the docs and comments name as examples of what a user writes, or as patterns; they are
#: not in the repository
EXAMPLES = {"config/my.yaml", "config/local.yaml", "config/scale.yaml", "config/x.yaml", "config/y.yaml",
            "config/a.yaml", "config/b.yaml", "config/t.yaml", "tests/test_my_method.py", "tests/...py",
            "tools/NAME.py"}
#: files of upstream repositories that comments cite (napkinXC's, ASL's, PyTorch's)
UPSTREAM = {"docs/quick_start.rst", "src/loss_functions/losses.py", "tools/autograd/derivatives.yaml"}
FENCE = re.compile(r"^\s*(```|~~~)")
CODE = re.compile(r"(`+)(.+?)\1")
DOTTED = re.compile(r"(?<![\w./-])cdgtmll(?:\.[A-Za-z_]\w*)+")
PATH = re.compile(r"(?<![\w./<{-])((?:\.ci|[A-Za-z_][\w.-]*)/[\w./<>{}*?\[\],-]*)")
#: a Python file named without its top folder: relative to the package when its first folder
#: is one of the package's (``nn/trainer.py``, ``cdgtmll/io.py``), to tests/ when it is one of
#: tests/ (``unit/nn/test_trainer.py``); other such paths (an upstream repository's) are not ours
RELATIVE = re.compile(r"^[a-z_]\w*(?:/[a-z_]\w*)+\.py$")
TEST_FOLDERS = ("unit", "integration", "cuda", "support", "fixtures")
#: dotted names ending so are file names (``cdgtmll.sif``), not Python names
FILE_SUFFIXES = {"sif", "yaml", "yml", "json", "toml", "tar", "gz", "whl", "log", "txt", "md"}


def code_text(text: str) -> list[tuple[int, str]]:
    """(line number, code): each inline code span, and each line of a fenced block."""
    out, fenced = [], False
    for no, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif fenced:
            out.append((no, line))
        else:
            out.extend((no, m.group(2).strip()) for m in CODE.finditer(line))
    return out


def module_file(module: str) -> Path | None:
    """The source file of a dotted module name under src/, or None."""
    base = SRC.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _bound(body: list[ast.stmt]) -> dict[str, ast.AST]:
    """Names a block defines (definitions and assignment targets), looking into if/try blocks."""
    out: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        out[name.id] = node
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            blocks = [node.body, getattr(node, "orelse", []), getattr(node, "finalbody", [])]
            blocks += [h.body for h in getattr(node, "handlers", [])]
            for block in blocks:
                out.update(_bound(block))
    return out


@functools.cache
def _definitions(path: Path) -> dict[str, ast.AST]:
    return _bound(ast.parse(path.read_bytes(), filename=str(path)).body)


def resolve_dotted(name: str) -> str | None:
    """Why a dotted name does not resolve, or None when it does."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        path = module_file(".".join(parts[:cut]))
        if path is not None:
            break
    else:
        return "no such module"
    rest = parts[cut:]
    if not rest or (len(rest) == 1 and rest[0].startswith("__")):  # ``cdgtmll.__file__``
        return None
    defs = _definitions(path)
    node = defs.get(rest[0])
    if node is None and rest[0].endswith("_") and len(rest) == 1 and any(k.startswith(rest[0]) for k in defs):
        return None  # a family of names: ``RULE_*``
    if node is None and path.name == "__init__.py":
        return f"package {'.'.join(parts[:cut])} has no module and defines no {rest[0]!r}"
    if node is None:
        return f"{path.relative_to(ROOT)} defines no {rest[0]!r}"
    if len(rest) == 1:
        return None
    if isinstance(node, ast.ClassDef) and len(rest) == 2 and rest[1] in _bound(node.body):
        return None
    return f"{'.'.join(rest[1:])!r} is not a member of {rest[0]!r} in {path.relative_to(ROOT)}"


def _bases(path: str) -> list[Path]:
    """The folders a path named on a page is read from; none when it is not the repository's."""
    if path.startswith(TOPS):
        return [ROOT]
    if RELATIVE.match(path):
        first = path.split("/", 1)[0]
        if first in TEST_FOLDERS:
            return [ROOT / "tests"]
        if first == "cdgtmll":
            return [SRC]
        if (SRC / "cdgtmll" / first).is_dir():
            return [SRC / "cdgtmll"]
    return []


def _expand(pattern: str) -> list[str]:
    """Shell brace alternatives: ``tests/{unit,cuda}/`` is two paths."""
    m = re.search(r"\{([^{}]*,[^{}]*)\}", pattern)
    if m is None:
        return [pattern]
    return [alt for part in m.group(1).split(",")
            for alt in _expand(pattern[:m.start()] + part + pattern[m.end():])]


def resolve_path(path: str) -> str | None:
    """Why a path named on a page does not exist, or None when it does (or is not ours)."""
    path = re.sub(r"(::.*|:\d+)$", "", path).rstrip(".,;:]")
    if path in EXAMPLES or path in UPSTREAM or not (bases := _bases(path)):
        return None
    for alternative in _expand(path):
        pattern = re.sub(r"<[^>]*>|\{[^}]*\}", "*", alternative).rstrip("/")
        globbed = any(ch in pattern for ch in "*?[")
        if not any(next(base.glob(pattern), None) is not None if globbed else (base / pattern).exists()
                   for base in bases):
            return "does not exist"
    return None


def stale_names(page: Path, texts: list[tuple[int, str]] | None = None) -> list[str]:
    """Every name and path of a page's code (or of ``texts``, (line, text) pairs of the file)
    that does not resolve, as 'page:line: ...'."""
    where = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page.name
    bad = []
    for no, span in code_text(page.read_text()) if texts is None else texts:
        for name in DOTTED.findall(span):
            if name.rsplit(".", 1)[-1] in FILE_SUFFIXES:
                continue
            if (why := resolve_dotted(name)) is not None:
                bad.append(f"{where}:{no}: {name}: {why}")
        for path in (m.group(1) for m in PATH.finditer(span)):
            if (why := resolve_path(path)) is not None:
                bad.append(f"{where}:{no}: {path}: {why}")
    return bad


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_names_and_paths_resolve(page: Path):
    bad = stale_names(page)
    assert not bad, "stale names in the docs:\n" + "\n".join(bad)


# ---- config keys --------------------------------------------------------------------------------

def schema_keys(schema: dict) -> list[str]:
    """Every key of the schema as a dotted path; a map's free key (patternProperties,
    additionalProperties with a schema) is ``<name>``. Maps whose values are plain values (a
    dataset's severities, a feature's action) end at ``<name>``; array items are values."""
    defs = schema.get("$defs", {})
    out: list[str] = []

    def walk(node, path: list[str], seen: tuple[str, ...]) -> None:
        if not isinstance(node, dict):
            return
        if "$ref" in node:
            ref = node["$ref"].rsplit("/", 1)[-1]
            if ref not in seen:
                walk(defs[ref], path, (*seen, ref))
        for key in ("allOf", "anyOf", "oneOf"):
            for sub in node.get(key, []):
                walk(sub, path, seen)
        for key, sub in node.get("properties", {}).items():
            out.append(".".join([*path, key]))
            walk(sub, [*path, key], seen)
        free = list(node.get("patternProperties", {}).values())
        if isinstance(node.get("additionalProperties"), dict) and node["additionalProperties"]:
            free.append(node["additionalProperties"])
        for sub in free:
            out.append(".".join([*path, "<name>"]))
            walk(sub, [*path, "<name>"], seen)

    walk(schema, [], ())
    return list(dict.fromkeys(out))


def _normal(key: str) -> str:
    return re.sub(r"<[^>]*>", "<name>", key)


def undocumented_keys(keys: list[str], readme: str) -> list[str]:
    """Keys config/README.md does not describe. A key is described by an inline code span with
    its full dotted path (``data.custom.<name>.impute``, any ``<placeholder>``), where ``.severity``
    after ``figures.pr_curve.dataset`` continues that parent; or by a table row, paragraph or
    list item that names its parent's full path and the key itself (``training.<dataset>``:
    ``epochs``, ``batch_size``, ...; ``format: mulan-arff`` names ``format``). A key is described,
    too, when a key under it is (``data.loader_options`` by ``data.loader_options.<dataset>``),
    and a map's free key (``<name>``) when the map is."""
    described: set[str] = set()
    fenced = False
    block: list[str] = []

    def close() -> None:
        spans = [_normal(s) for s in block]
        parents = []
        for span in spans:
            if span.startswith(".") and parents:
                span = parents[-1].rsplit(".", 1)[0] + span
            if re.fullmatch(r"[\w<>]+(\.[\w<>]+)+", span):
                parents.append(span)
        described.update(parents)
        described.update(spans)
        leaves = {m.group(0) for s in spans if (m := re.match(r"^\w+(?=$|:)", s))}
        described.update(f"{p}.{leaf}" for p in parents for leaf in leaves)
        block.clear()

    for line in readme.splitlines() + [""]:
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "- ", "|")):
            close()
        block.extend(m.group(2).strip() for m in CODE.finditer(line))
        if stripped.startswith(("#", "|")):
            close()
    return [k for k in keys if k not in described
            and not any(d.startswith(k + ".") for d in described)
            and not (k.endswith(".<name>") and k.rsplit(".", 1)[0] in described)]


def test_every_schema_key_is_in_the_config_readme():
    keys = schema_keys(yaml.safe_load(SCHEMA.read_text()))
    assert "data.custom.<name>.impute" in keys and "training.<name>.optimizer_impl" in keys
    missing = undocumented_keys(keys, (ROOT / "config" / "README.md").read_text())
    assert not missing, f"config/README.md does not describe: {missing}"


# ---- the checker rejects what is stale ---------------------------------------------------------

@pytest.mark.parametrize(("text", "stale"), [
    ("Trains in `cdgtmll.nn.trainer.train_model`.", "cdgtmll.nn.trainer.train_model"),
    ("See `cdgtmll.data.split`.", "cdgtmll.data.split"),
    ("Registered by `cdgtmll.methods.base.Method.no_such_member`.", "cdgtmll.methods.base.Method.no_such_member"),
    ("The test `tests/test_install.py` checks it.", "tests/test_install.py"),
    ("Rules in `workflow/rules/nothing.smk`.", "workflow/rules/nothing.smk"),
    ("The loop is in `nn/trainers.py`.", "nn/trainers.py"),
    ("Scripts: `tools/*.rb`.", "tools/*.rb"),
])
def test_a_stale_name_is_found(tmp_path: Path, text: str, stale: str):
    page = tmp_path / "page.md"
    page.write_text(f"# Page\n\n{text}\n\n```bash\npython -m cdgtmll.no_such_module\n```\n")
    bad = stale_names(page)
    assert len(bad) == 2 and bad[0].startswith(f"page.md:3: {stale}:"), bad
    assert bad[1] == "page.md:6: cdgtmll.no_such_module: package cdgtmll has no module and defines no 'no_such_module'"


@pytest.mark.parametrize("text", [
    "`cdgtmll.nn.trainer.train`, `cdgtmll.data.processed.ProcessedData.save`, `cdgtmll.methods`",
    "`src/cdgtmll/config/schema.yaml`, `workflow/rules/*.smk`, `results/data/<dataset>/` (an output)",
    "`nn/trainer.py`, `make all CONFIG=config/quick.yaml`, `tests/unit/test_docs.py::test_slug`",
])
def test_a_current_name_passes(tmp_path: Path, text: str):
    page = tmp_path / "page.md"
    page.write_text(f"{text}\n")
    assert stale_names(page) == []


def test_a_missing_key_is_found():
    keys = ["data.min_split_rows", "data.loader_options", "data.custom.<name>.impute",
            "data.custom.<name>.format", "figures.pr_curve.severity", "training.<name>.epochs",
            "training.<name>.optimizer_impl", "r_variants.severities.<name>"]
    readme = ("| `data.custom.<name>` | `{}` | `format: mulan-arff`, ... |\n"
              "| `data.loader_options.<dataset>` | `{}` | options |\n"
              "| `figures.pr_curve.dataset`, `.severity` | ... |\n"
              "| `r_variants.severities` | ... |\n\n"
              "Per dataset, `training.<dataset>`: `epochs`, ...\n\n"
              "- `optimizer_impl`: AdamW's implementation; `impute` elsewhere\n")
    assert undocumented_keys(keys, readme) == ["data.min_split_rows", "data.custom.<name>.impute",
                                               "training.<name>.optimizer_impl"]


# ---- the README's job counts --------------------------------------------------------------------

def test_the_timings_block_is_generated_from_its_records():
    """docs/benchmarks.md's timings block is what ``tools/readme_timings.py --render`` makes of
    docs/timings.json, the job counts without the XMC environments included."""
    import json

    tool = load_tool("readme_timings")
    text = tool.TARGET.read_text()
    block = tool.BEGIN + text.split(tool.BEGIN, 1)[1].split(tool.END, 1)[0] + tool.END
    store = json.loads(tool.STORE.read_text())
    assert block == tool.render(store), "run: python tools/readme_timings.py --render"
    for name, c in store["jobs"]["profiles"].items():
        without = c["without_xmc_envs"]
        assert (f"config/{name}` | {c['total']} jobs, of which {c['train']} training jobs (XMC library environments "
                f"ready: {', '.join(store['jobs']['xmc_envs'])}); without the XMC library environments "
                f"{without['total']} ({without['train']})") in block


def test_the_readmes_job_counts_are_the_measured_ones():
    """Each profile's row of the README's profile table gives the job and training-job counts
    ``tools/readme_timings.py --only jobs`` recorded in docs/timings.json, with the XMC library
    environments built and without them (their rows then run no jobs)."""
    import json

    record = json.loads((ROOT / "docs" / "timings.json").read_text())["jobs"]
    assert record["xmc_envs"] == ["libmultilabel", "napkinxc", "pecos"], "measure with every XMC environment ready"
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `config/([\w.-]+\.yaml)`.*$",
                                                        (ROOT / "README.md").read_text(), re.M)}
    bad = []
    for name, counts in record["profiles"].items():
        last = rows.get(name, "").rstrip(" |").rsplit("|", 1)[-1]
        for c in (counts, counts["without_xmc_envs"]):
            if f"{c['total']} ({c['train']})" not in last:
                bad.append(f"config/{name}: README says {last.strip()!r}, measured {c['total']} ({c['train']})")
    assert not bad, "\n".join(bad) + "\n(python tools/readme_timings.py --only jobs measures them)"


# ---- comments explain the code; they do not narrate its history ---------------------------------

#: our own issue numbers ("issue", a space and the number; "Issues" too); an upstream issue is
#: named with its project and "#" ("snakemake/snakemake#3804", "plugin issue #109"), and stays
OWN_ISSUE = re.compile(r"\bissues?\s+\d+", re.I)
#: the code whose comments and docstrings are checked
CODE_DIRS = ("src", "workflow", "tools", "benchmarks", "tests")


def comments_and_docstrings(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of every comment (what follows ``#`` on a line) and every
    triple-quoted string (docstrings, and the few multi-line strings) of a Python or Snakemake
    file. Read by pattern, not parsed: fast, and Snakemake's syntax is not Python's; a ``#``
    inside a string counts as a comment."""
    text = path.read_text()
    out = [(no, line.split("#", 1)[1]) for no, line in enumerate(text.splitlines(), 1) if "#" in line]
    out += [(text.count("\n", 0, m.start()) + 1, m.group(0)) for m in re.finditer(r'("""|\'\'\')[\s\S]*?\1', text)]
    return out


def narrations(path: Path) -> list[str]:
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    if not OWN_ISSUE.search(path.read_text()):  # most files: nothing to parse
        return []
    return [f"{where}:{no}: {m.group(0)}" for no, text in comments_and_docstrings(path)
            for m in OWN_ISSUE.finditer(text)]


def code_files() -> list[Path]:
    """The code's files, less this one (its examples of stale names and cited issues are data)."""
    files = [ROOT / "Snakefile"]
    for top in CODE_DIRS:
        files += [p for p in (ROOT / top).rglob("*") if p.suffix in (".py", ".smk", ".sh") and p.is_file()]
    return sorted(p for p in files if p != Path(__file__).resolve())


def test_comments_do_not_cite_our_issues():
    bad = [hit for path in code_files() for hit in narrations(path)]
    assert not bad, "a comment says what the code does and why, not which issue changed it:\n" + "\n".join(bad)


def test_names_and_paths_in_comments_resolve():
    """What comments and docstrings of the code name exists too (``tests/unit/data/test_splits.py``,
    ``cdgtmll.variants.occlusion``), and so does what the comments of the config files name
    (pyproject.toml, the Makefile, the profiles, ...)."""
    bad = [hit for path in code_files() for hit in stale_names(path, comments_and_docstrings(path))]
    configs = [ROOT / n for n in ("pyproject.toml", "Makefile", "Dockerfile", "environment.yml", "dvc.yaml",
                                  "params.yaml")]
    configs += [*(ROOT / "profiles").rglob("*.yaml"), *(ROOT / "config").glob("*.yaml"), *(ROOT / "mk").glob("*")]
    for path in configs:
        comments = [(no, line.split("#", 1)[1]) for no, line in enumerate(path.read_text().splitlines(), 1)
                    if "#" in line]
        bad += stale_names(path, comments)
    assert not bad, "stale names in comments:\n" + "\n".join(bad)


def test_a_stale_name_in_a_comment_is_found(tmp_path: Path):
    path = tmp_path / "m.py"
    path.write_text('"""Measured in ``tests/test_splits.py``."""\n\nX = "tests/nothing.py"  # see cdgtmll.occlusion\n'
                    "Y = 1  # cdgtmll.__file__, tests/unit/data/test_splits.py, cdgtmll.metrics.thresholds.RULE_*\n")
    assert stale_names(path, comments_and_docstrings(path)) == [
        "m.py:3: cdgtmll.occlusion: package cdgtmll has no module and defines no 'occlusion'",
        "m.py:1: tests/test_splits.py: does not exist"]


@pytest.mark.parametrize(("name", "text", "hits"), [
    ("a.py", '"""Kept as the reference (before issue 25)."""\nX = 1  # see Issue 38, item 6\n', 2),
    ("b.py", 'def f():\n    """Issues 39 and 40: the nested rule."""\n    return "issue 7 is data, not a comment"\n', 1),
    ("c.py", "# requeued jobs go on (plugin issue #109; snakemake/snakemake#3804)\n", 0),
    ("d.smk", "# ranks across datasets (issue 39)\nrule r:\n    shell: 'echo'\n", 1),
])
def test_a_cited_issue_is_found(tmp_path: Path, name: str, text: str, hits: int):
    path = tmp_path / name
    path.write_text(text)
    assert len(narrations(path)) == hits, narrations(path)


# ---- the changelog -------------------------------------------------------------------------------

SECTIONS = ("Added", "Changed", "Fixed", "Re-runs")


def changelog_problems(text: str, version: str) -> list[str]:
    """What keeps a changelog from the shape CHANGELOG.md keeps: ``## [Unreleased]`` first, then
    ``## [X.Y.Z] - YYYY-MM-DD`` newest first, the newest being ``version`` (pyproject.toml's);
    within each, only ``### Added``, ``Changed``, ``Fixed`` and ``Re-runs``, in that order; no
    commit hashes (measurements and their commits are in docs/benchmarks.md)."""
    problems = []
    versions = re.findall(r"^## (.*)$", text, re.M)
    if not versions or versions[0] != "[Unreleased]":
        problems.append(f"the first version is {versions[:1]}, not [Unreleased]")
    released = [m for v in versions[1:] if (m := re.fullmatch(r"\[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}", v))]
    if len(released) != len(versions) - 1:
        problems.append(f"versions not written '[X.Y.Z] - YYYY-MM-DD': {versions[1:]}")
    numbers = [tuple(int(x) for x in m.group(1).split(".")) for m in released]
    if numbers != sorted(numbers, reverse=True) or (released and released[0].group(1) != version):
        problems.append(f"released versions {[m.group(1) for m in released]}: newest first, the newest {version}")
    for block in re.split(r"^## .*$", text, flags=re.M)[1:]:
        heads = re.findall(r"^### (.*)$", block, re.M)
        if any(h not in SECTIONS for h in heads) or heads != sorted(heads, key=SECTIONS.index):
            problems.append(f"sections {heads}: only {SECTIONS}, in that order")
    problems += [f"a commit hash: {h}" for h in re.findall(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b", text)]
    return problems


def test_the_changelog_is_kept_in_versions():
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    problems = changelog_problems((ROOT / "CHANGELOG.md").read_text(), version)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(("text", "problem"), [
    ("## Unreleased\n### Added\n- x\n", "the first version"),
    ("## [Unreleased]\n## [0.1.0] - 2026-11-28\n### Fixed\n- x\n### Added\n- y\n", "in that order"),
    ("## [Unreleased]\n## [0.1.0] - 2026-11-28\n### Benchmarks\n- x\n", "only"),
    ("## [Unreleased]\n## [0.0.9] - 2026-11-28\n", "the newest 0.1.0"),
    ("## [Unreleased]\n### Changed\n- faster at c44a607\n## [0.1.0] - 2026-11-28\n", "a commit hash: c44a607"),
])
def test_a_changelog_out_of_shape_is_found(text: str, problem: str):
    assert any(problem in p for p in changelog_problems(text, "0.1.0")), changelog_problems(text, "0.1.0")
