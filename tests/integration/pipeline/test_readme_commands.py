"""The README's commands, run as a newcomer runs them: in order, in a fresh clone of this checkout.

Convention (README.md). The commands are the lines of its ```bash blocks (a blank line or a
``#`` line is not a command; a trailing ``\\`` joins the next line). ```console, ```sh and other
blocks show output or reference material and are never run. HTML comments on the lines
directly above a ```bash block steer this test; they do not render:

``<!-- readme-test: skip: REASON -->``
    the block is not run; each of its lines is a skipped test that gives REASON;
``<!-- readme-test: skip `COMMAND`: REASON -->``
    that line of the block (compared word by word, comments left out) is not run;
``<!-- readme-test: quick -->``
    profile commands of the block run the quick profile: ``make all|report|cluster``
    get ``CONFIG=config/quick.yaml`` and ``snakemake ...`` gets ``--configfile
    config/quick.yaml``, unless they name a profile themselves.

A directive anywhere else, or one this test does not know, fails ``test_readme_directives``.

Each command is one test, in README order, all in one clone: ``git clone`` of HEAD, then the
working tree laid over it (tracked and untracked files git does not ignore; files deleted from
the working tree deleted), so uncommitted edits are tested as they stand. The clone's path
contains a space. The shell is a user's: no virtual environment on PATH, no variables of an
enclosing ``make`` or pytest, the clone's own caches (the Makefile's ``XDG_CACHE_HOME``), except
uv's: the checkout's filled cache (``UV_CACHE_DIR=.cache/uv``) when there is one, so that ``make
venv`` installs from it rather than from the network. The dataset mirror is the suite's
(``mirror`` fixture: ``CDGTMLL_DATA_MIRROR``, or Yeast rebuilt from its packaged copy). After a
command fails, the later ones skip. Each command's output is kept beside the clone
(``readme-<n>.log``) and its tail shown on failure.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.paths import ROOT

README = ROOT / "README.md"
QUICK = "config/quick.yaml"
#: seconds one command may take (`make all` on the quick profile: about 7 min on 2 cores)
TIMEOUT = 2400

DIRECTIVE = re.compile(r"^\s*<!--\s*readme-test:\s*(?P<body>.*?)\s*-->\s*$")
ANY_DIRECTIVE = re.compile(r"<!--\s*readme-test")
FENCE = re.compile(r"^\s*```\s*(?P<lang>[\w+-]*)\s*$")
SKIP_LINE = re.compile(r"^skip\s+`(?P<cmd>[^`]+)`\s*:\s*(?P<why>\S.*)$")
SKIP_BLOCK = re.compile(r"^skip\s*:\s*(?P<why>\S.*)$")
PROFILE_MAKE_TARGETS = {"all", "report", "cluster"}


@dataclass(frozen=True)
class Command:
    """One README command: where it is, as written, what runs, and why not (``skip``)."""
    line: int
    text: str
    run: str
    skip: str | None = None

    @property
    def id(self) -> str:
        return f"L{self.line}: {shlex.join(words(self.run))}"


def words(cmd: str) -> list[str]:
    """The shell words of ``cmd``, comments left out."""
    return shlex.split(cmd, comments=True)


def quick(cmd: str) -> str:
    """``cmd`` on the quick profile when it is a profile command naming no profile."""
    w = words(cmd)
    if not w:
        return cmd
    if w[0] == "make" and PROFILE_MAKE_TARGETS & set(w[1:]) and not any(x.startswith("CONFIG=") for x in w):
        return shlex.join([*w, f"CONFIG={QUICK}"])
    if Path(w[0]).name == "snakemake" and "--configfile" not in w and "--unlock" not in w:
        return shlex.join([*w, "--configfile", QUICK])
    return cmd


def block_lines(body: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """(README line, command) of a ```bash block's lines: blank and ``#`` lines left out,
    ``\\`` continuations joined."""
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for no, raw in body:
        text = raw.rstrip()
        if pending is not None:
            text = pending[1] + " " + text.strip()
            no = pending[0]
            pending = None
        if text.endswith("\\"):
            pending = (no, text[:-1].rstrip())
            continue
        if text.strip() and not text.strip().startswith("#"):
            out.append((no, text.strip()))
    if pending is not None:
        raise ValueError(f"README.md:{pending[0]}: the block ends in a line continuation")
    return out


def parse_readme(text: str) -> list[Command]:
    """Every command of the README's ```bash blocks, with its directives applied (module
    docstring); ValueError naming the README line of a malformed block or directive."""
    lines = text.splitlines()
    commands: list[Command] = []
    used: set[int] = set()
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip().startswith("```")), None)
        if end is None:
            raise ValueError(f"README.md:{i + 1}: code block never closed")
        directives: list[tuple[int, str]] = []
        k = i - 1
        while k >= 0 and DIRECTIVE.match(lines[k]):
            directives.insert(0, (k + 1, DIRECTIVE.match(lines[k])["body"]))
            used.add(k + 1)
            k -= 1
        lang = fence["lang"]
        if lang != "bash":
            if directives:
                raise ValueError(f"README.md:{directives[0][0]}: a readme-test directive above a ```{lang or 'plain'} "
                                 "block: only ```bash blocks are run")
            i = end + 1
            continue
        block_skip, line_skips, is_quick = None, {}, False
        for no, body in directives:
            if body == "quick":
                is_quick = True
            elif m := SKIP_LINE.match(body):
                line_skips[tuple(words(m["cmd"]))] = (no, m["why"])
            elif m := SKIP_BLOCK.match(body):
                block_skip = m["why"]
            else:
                raise ValueError(f"README.md:{no}: unknown readme-test directive {body!r} (known: quick; skip: REASON; "
                                 "skip `COMMAND`: REASON)")
        cmds = block_lines([(n + 1, lines[n]) for n in range(i + 1, end)])
        if not cmds:
            raise ValueError(f"README.md:{i + 1}: a ```bash block without a command")
        seen: set[tuple[str, ...]] = set()
        for no, cmd in cmds:
            key = tuple(words(cmd))
            seen.add(key)
            why = block_skip or (line_skips[key][1] if key in line_skips else None)
            commands.append(Command(no, cmd, quick(cmd) if is_quick else cmd, why))
        for key, (no, _) in line_skips.items():
            if key not in seen:
                raise ValueError(f"README.md:{no}: the directive skips `{shlex.join(key)}`, which is not a line of "
                                 "the block below it")
        i = end + 1
    stray = [n + 1 for n, line in enumerate(lines) if ANY_DIRECTIVE.search(line) and n + 1 not in used]
    if stray:
        raise ValueError(f"README.md:{stray[0]}: a readme-test directive that is not on the lines directly above a "
                         "```bash block (or not on a line of its own)")
    return commands


try:
    COMMANDS, PARSE_ERROR = parse_readme(README.read_text()), None
except ValueError as exc:
    COMMANDS, PARSE_ERROR = [], str(exc)


def test_readme_directives():
    """The README parses under the convention above, and its first block holds the two commands."""
    assert PARSE_ERROR is None, PARSE_ERROR
    assert [c.text.split("#")[0].split() for c in COMMANDS[:2]] == [["make", "all"], ["make", "test"]]


def test_quick_substitution():
    assert quick("make all   # run it") == f"make all CONFIG={QUICK}"
    assert quick("make all CONFIG=config/paper.yaml") == "make all CONFIG=config/paper.yaml"
    assert quick("make test") == "make test"
    assert quick("snakemake all --cores all") == f"snakemake all --cores all --configfile {QUICK}"
    assert quick(".venv/bin/snakemake --unlock") == ".venv/bin/snakemake --unlock"


def test_parse_convention():
    text = "\n".join([
        "<!-- readme-test: quick -->",
        "<!-- readme-test: skip `make test`: it is this suite -->",
        "```bash", "make all   # everything", "", "# a comment", "make test", "```",
        "```console", "$ make all", "```",
        "<!-- readme-test: skip: needs a cluster -->",
        "```bash", "make cluster \\", "  PROFILE=profiles/slurm", "```",
    ])
    got = [(c.line, c.run, c.skip) for c in parse_readme(text)]
    assert got == [(4, f"make all CONFIG={QUICK}", None), (7, "make test", "it is this suite"),
                   (14, "make cluster PROFILE=profiles/slurm", "needs a cluster")]
    for bad in ("<!-- readme-test: sikp: x -->\n```bash\nls\n```", "<!-- readme-test: quick -->\n\n```bash\nls\n```",
                "<!-- readme-test: skip `make x`: y -->\n```bash\nls\n```",
                "<!-- readme-test: quick -->\n```console\n$ ls\n```"):
        with pytest.raises(ValueError, match=r"README\.md:\d+"):
            parse_readme(bad)


# ---- running them ------------------------------------------------------------------------


def _require(tool: str, why: str) -> None:
    """Skip (fail under CI) when ``tool`` is not on PATH."""
    if shutil.which(tool) is None:
        msg = f"{tool} not on PATH: {why}"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)


def user_env(mirror: Path) -> dict[str, str]:
    """A user's shell: no virtual environment, no make/pytest variables, the clone's caches but
    uv's (the checkout's filled uv cache when there is one), the suite's dataset mirror."""
    drop = {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "XDG_CACHE_HOME", "MPLCONFIGDIR", "UV_CACHE_DIR",
            "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("PYTEST_")}
    ours = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and p != ours and ".venv" not in Path(p).parts)
    if (ROOT / ".cache" / "uv").is_dir():
        env["UV_CACHE_DIR"] = str(ROOT / ".cache" / "uv")
    env["CDGTMLL_DATA_MIRROR"] = str(mirror)
    return env


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def fresh_clone(dest: Path) -> Path:
    """``git clone`` of HEAD at ``dest``, then the working tree as it stands laid over it."""
    git("clone", "-q", str(ROOT), str(dest))
    for rel in filter(None, git("ls-files", "-z", "-c", "-o", "--exclude-standard").split("\0")):
        src, dst = ROOT / rel, dest / rel
        if src.is_symlink() or src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            if dst.is_symlink() or dst.exists():
                dst.unlink()
            shutil.copy2(src, dst, follow_symlinks=False)
    for rel in filter(None, git("ls-files", "-z", cwd=dest).split("\0")):
        if not ((ROOT / rel).exists() or (ROOT / rel).is_symlink()):
            (dest / rel).unlink(missing_ok=True)
    return dest


@dataclass
class Clone:
    path: Path
    env: dict[str, str]
    failed: str | None = None


@pytest.fixture(scope="module")
def clone(tmp_path_factory, mirror):
    if PARSE_ERROR:
        pytest.fail(PARSE_ERROR)
    _require("git", "the README's commands run in a fresh git clone")
    _require("make", "the README's two commands are make targets")
    _require("python3.11", "make venv creates .venv with python3.11")
    if not (ROOT / ".git").exists():
        pytest.skip(f"{ROOT} is not a git checkout: nothing to clone")
    path = fresh_clone(tmp_path_factory.mktemp("readme") / "fresh clone")
    yield Clone(path, user_env(mirror))
    shutil.rmtree(path, ignore_errors=True)  # .venv and results: gigabytes


@pytest.mark.slow
@pytest.mark.parametrize("cmd", COMMANDS, ids=[c.id for c in COMMANDS])
def test_readme_command(cmd: Command, clone: Clone):
    if cmd.skip:
        pytest.skip(f"README.md:{cmd.line} `{cmd.text}`: {cmd.skip}")
    if clone.failed:
        pytest.skip(f"an earlier README command failed: {clone.failed}")
    log = clone.path.parent / f"readme-{cmd.line}.log"
    t0 = time.monotonic()
    try:
        with open(log, "w") as out:
            proc = subprocess.run(["bash", "-c", cmd.run], cwd=clone.path, env=clone.env, stdout=out,
                                  stderr=subprocess.STDOUT, timeout=TIMEOUT)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        rc = f"nothing within {TIMEOUT} s (killed)"
    wall = time.monotonic() - t0
    print(f"README.md:{cmd.line} `{cmd.run}`: exit {rc} after {wall:.0f} s; output in {log}")
    if rc != 0:
        clone.failed = f"README.md:{cmd.line} `{cmd.run}`"
        tail = log.read_text(errors="replace")[-4000:]
        pytest.fail(f"README.md:{cmd.line}: `{cmd.run}` (in {clone.path}) exited {rc} after {wall:.0f} s; "
                    f"last output:\n{tail}")
