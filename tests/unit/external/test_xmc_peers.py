"""XR-Linear, napkinXC-PLT and LibMultiLabel-1vsRest on real data (Bibtex, Delicious from the
mirror), each through its worker in its own environment (.venv/xmc/<name>, built through
make by :func:`tests.support.external_envs.require_env`); what the pipeline does when an environment
cannot be built; the worker protocol."""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import expit

from cdgtmll.config import loader, plan
from cdgtmll.external.client import WorkerClient, WorkerError
from cdgtmll.external.envs import ROOT_ENV, ExternalEnv, checkout_root
from cdgtmll.external.worker_protocol import topk_dense, topk_rows
from cdgtmll.methods.base import FitData, NotRunnable, RunContext, build
from cdgtmll.metrics.definitions import precision_at_k
from tests.support.external_envs import require_env
from tests.support.mirror import mirror_file
from tests.support.paths import ROOT

#: method -> environment
ENVS = {"XR-Linear": "pecos", "napkinXC-PLT": "napkinxc", "LibMultiLabel-1vsRest": "libmultilabel"}
#: (mirror folder, number of labels)
DATASETS = {"bibtex": 159, "delicious": 983}
#: Delicious rows used (train, test): its first 3,000 of 12,920 training and 1,000 of 3,185
#: test rows keep each test at seconds (LibMultiLabel's one-vs-rest trains 983 SVMs on one
#: thread: ~2-4 min on all rows). Bibtex: all rows for P@k, a slice for the round trip.
DELICIOUS_ROWS = (3000, 1000)
ROUND_TRIP_ROWS = (2000, 500)


@pytest.fixture(scope="module")
def mulan(mirror):
    """``name -> (X_train, Y_train, X_test, Y_test)``: the official MULAN train/test files,
    read as the pipeline reads them (float32 features, uint8 labels)."""
    from cdgtmll.data.mulan import read_mulan_arff

    cache = {}

    def get(name):
        if name not in cache:
            L = DATASETS[name]
            # each file through mirror_file: skipped, naming it, where the mirror lacks it
            Xtr, Ytr, _ = read_mulan_arff(mirror_file(mirror, f"{name}/{name}-train.arff"), L)
            Xte, Yte, _ = read_mulan_arff(mirror_file(mirror, f"{name}/{name}-test.arff"), L)
            cache[name] = (np.asarray(Xtr, np.float32), np.asarray(Ytr, np.uint8),
                           np.asarray(Xte, np.float32), np.asarray(Yte, np.uint8))
        return cache[name]

    return get


def _fit(method: str, X, Y, tmp_path, hparams=None):
    m = build(method, hparams or {})
    m.fit(FitData(X, Y, None, None, [f"l{i}" for i in range(Y.shape[1])]), RunContext(seed=0, workdir=tmp_path))
    return m


def _prior_ranking(Y_train, n_rows):
    """Every row ranked by training label frequency (the best constant ranking)."""
    return np.tile(Y_train.sum(axis=0).astype(np.float64), (n_rows, 1))


# ----------------------------------------------------------------- real P@k, each library


@pytest.mark.slow
@pytest.mark.parametrize("dataset", sorted(DATASETS))
@pytest.mark.parametrize("method", list(ENVS))
def test_real_precision_at_k(method, dataset, mulan, tmp_path):
    require_env(ENVS[method])
    Xtr, Ytr, Xte, Yte = mulan(dataset)
    if dataset == "delicious":
        (a, b) = DELICIOUS_ROWS
        Xtr, Ytr, Xte, Yte = Xtr[:a], Ytr[:a], Xte[:b], Yte[:b]
    m = _fit(method, Xtr, Ytr, tmp_path)
    S = m.predict_proba(Xte)
    m.close()
    assert S.shape == Yte.shape and np.isfinite(S).all() and S.min() >= 0 and S.max() <= 1
    p = precision_at_k(Yte, S, ks=(1, 3, 5))
    prior = precision_at_k(Yte, _prior_ranking(Ytr, len(Yte)), ks=(1, 3, 5))
    random = Yte.sum() / Yte.size  # expected P@k of a uniformly random ranking
    for k in ("p@1", "p@3", "p@5"):
        assert p[k] > 8 * random, (method, dataset, k, p[k], random)
        assert p[k] > prior[k] + 0.02, (method, dataset, k, p[k], prior[k])
    info = m.extra_outputs()["external"]
    assert info["env"] == f".venv/xmc/{ENVS[method]}"
    assert info["lock_sha256"] == ExternalEnv.of(ENVS[method]).lock_sha256()
    assert info["worker_peak_rss_mb"] > 10 and info["worker_fit_seconds"] > 0


# ------------------------------------------- worker round trip == the library called directly

# Each script calls the library's documented API in its own environment, on the same files,
# with the method's default settings, and saves the dense raw scores (no cdgtmll code).
DIRECT = {
    "XR-Linear": """
        import numpy as np, scipy.sparse as sp
        from pecos.xmc import Indexer, LabelEmbeddingFactory
        from pecos.xmc.xlinear.model import XLinearModel
        def unit_rows(X):
            X = sp.csr_matrix(X, dtype=np.float32); X.sort_indices()
            n = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel()); n[n == 0] = 1.0
            X = sp.csr_matrix(sp.diags((1.0 / n).astype(np.float32)) @ X, dtype=np.float32); X.sort_indices()
            return X
        X, Xt = unit_rows(sp.load_npz("x.npz")), unit_rows(sp.load_npz("xt.npz"))
        Y = sp.csc_matrix(sp.load_npz("y.npz"), dtype=np.float32)
        C = Indexer.gen(LabelEmbeddingFactory.create(Y, X, method="pifa"), indexer_type="hierarchicalkmeans",
                        nr_splits=16, max_leaf_size=100, seed=0, threads=-1)
        m = XLinearModel.train(X, Y, C=C, threshold=0.1, Cp=1.0, Cn=1.0, threads=-1, beam_size=10,
                               only_topk=100, post_processor="l3-hinge")
        P = m.predict(Xt, beam_size=10, only_topk=100, post_processor="l3-hinge", threads=-1)
        np.save("direct.npy", P.toarray().astype(np.float64))
    """,
    "napkinXC-PLT": """
        import numpy as np, scipy.sparse as sp
        from napkinxc.models import PLT
        X, Xt = sp.load_npz("x.npz").astype(np.float64), sp.load_npz("xt.npz").astype(np.float64)
        Y = sp.load_npz("y.npz")
        plt = PLT("model", seed=0, threads=1)
        plt.fit(X.tocsr(), [Y.indices[a:b].tolist() for a, b in zip(Y.indptr[:-1], Y.indptr[1:])])
        S = np.zeros((Xt.shape[0], Y.shape[1]))
        for i, row in enumerate(plt.predict_proba(Xt.tocsr(), top_k=Y.shape[1])):
            for lab, p in row:
                S[i, lab] = p
        np.save("direct.npy", S)
    """,
    "LibMultiLabel-1vsRest": """
        import numpy as np, scipy.sparse as sp
        from unittest import mock
        import libmultilabel.linear as linear
        X, Xt = sp.load_npz("x.npz").astype(np.float64).tocsr(), sp.load_npz("xt.npz").astype(np.float64).tocsr()
        Y = sp.load_npz("y.npz").astype(np.float64).tocsr()
        with mock.patch("libmultilabel.linear.linear.psutil.cpu_count", lambda logical=True: 1):
            model = linear.train_1vsrest(Y, X, options="", verbose=False)
        np.save("direct.npy", linear.predict_values(model, Xt))
    """,
}


@pytest.mark.slow
@pytest.mark.parametrize("method", list(ENVS))
def test_worker_round_trip_equals_direct_library_call(method, mulan, tmp_path):
    """Bibtex (first 2,000 training and 500 test rows): the method's scores (worker process,
    npz transport, top-k reassembly) are exactly those of the library called directly in a
    separate process of its environment (which also shows that a fresh process with the
    same seed reproduces the model)."""
    env = require_env(ENVS[method])
    Xtr, Ytr, Xte, _ = mulan("bibtex")
    (a, b) = ROUND_TRIP_ROWS
    Xtr, Ytr, Xte = Xtr[:a], Ytr[:a], Xte[:b]
    m = _fit(method, Xtr, Ytr, tmp_path / "run")
    S = m.predict_proba(Xte)
    idx, raw = m.raw_topk(Xte)
    m.close()
    d = tmp_path / "direct"
    d.mkdir()
    for name, A in (("x", Xtr), ("y", Ytr), ("xt", Xte)):
        sp.save_npz(d / f"{name}.npz", sp.csr_matrix(A))
    (d / "direct.py").write_text(textwrap.dedent(DIRECT[method]))
    res = subprocess.run([str(env.python), "-E", "-s", "direct.py"], cwd=d, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    D = np.load(d / "direct.npy")
    R = np.zeros_like(D)
    rows, cols = np.nonzero(idx >= 0)
    R[rows, idx[rows, cols]] = raw[rows, cols]
    assert np.array_equal(R, D), np.abs(R - D).max()
    expected = expit(D) if method == "LibMultiLabel-1vsRest" else np.clip(D, 0, 1)
    if method == "LibMultiLabel-1vsRest":
        assert idx.shape[1] == D.shape[1]  # every label scored
    assert np.array_equal(S, expected)


@pytest.mark.slow
def test_each_environment_is_its_lock(tmp_path):
    """Each environment holds exactly its lock's pins (libpecos with numpy < 2 beside a
    numpy-2 project environment)."""
    for name in ("pecos", "napkinxc", "libmultilabel"):
        env = require_env(name)
        assert env.stamp.read_text().strip() == env.lock_sha256()
        pins = {}
        for line in env.lock.read_text().splitlines():
            if "==" in line and not line.startswith("#"):
                dist, _, ver = line.split(" ")[0].partition("==")
                pins[dist.lower().replace("_", "-")] = ver
        res = subprocess.run([str(env.python), "-E", "-s", "-c",
                              "import json, importlib.metadata as m; print(json.dumps([{'name': d.metadata['Name'], "
                              "'version': d.version} for d in m.distributions()]))"], capture_output=True, text=True)
        installed = {d["name"].lower().replace("_", "-"): d["version"] for d in json.loads(res.stdout)}
        for seeded in ("pip", "setuptools"):  # what `python -m venv` puts in every venv
            installed.pop(seeded, None)
        assert installed == pins, (name, set(installed.items()) ^ set(pins.items()))
    assert ExternalEnv.of("pecos").pinned("numpy").startswith("numpy==1.")
    assert ExternalEnv.of("pecos").pinned() == "libpecos==1.2.8"


# ---------------------------------------------- an environment that cannot be built: not run


def _scratch_checkout(tmp_path: Path) -> Path:
    """A checkout with the make file, the build script, the workers and the locks only."""
    root = tmp_path / "checkout"
    (root / "src" / "cdgtmll").mkdir(parents=True)
    shutil.copytree(ROOT / "mk", root / "mk")
    shutil.copytree(ROOT / "src" / "cdgtmll" / "external", root / "src" / "cdgtmll" / "external",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pecos", "napkinxc", "libmultilabel"):
        shutil.copy(ROOT / f"requirements-{name}.lock", root)
    return root


@pytest.mark.slow
def test_unbuildable_environment_is_a_not_run_reason_in_the_tables(tmp_path, monkeypatch):
    """No Python 3.11 for the venv (PY of mk/xmc-envs.mk): the build (as `make xmc-envs` runs
    it) fails at once, offline; the reason names the environment, the lock and the log, reaches
    config.not_runnable (what the tables print), and fit raises NotRunnable. Asking never
    builds: neither for the same lock nor after it changed."""
    root = _scratch_checkout(tmp_path)
    monkeypatch.setenv(ROOT_ENV, str(root))
    monkeypatch.setenv("PY", str(tmp_path / "no-such-python3.11"))
    assert checkout_root() == root
    m = build("XR-Linear")
    assert ExternalEnv.of("pecos").ensure(build=True) is not None
    reason = m.not_runnable_reason()
    assert reason.startswith("environment .venv/xmc/pecos could not be built from requirements-pecos.lock: "), reason
    assert "no-such-python3.11" in reason or "No interpreter found" in reason
    assert "pecos.build.log" in reason and "make xmc-envs" in reason
    env = ExternalEnv.of("pecos")
    assert not env.ready() and not env.dir.exists() and env.failed_marker.is_file()
    log_mtime = env.build_log.stat().st_mtime_ns
    cfg = loader.load(ROOT / "config" / "mulan.yaml")
    assert plan.not_runnable(cfg, "bibtex", "XR-Linear") == reason
    assert env.build_log.stat().st_mtime_ns == log_mtime  # same lock: not rebuilt
    with pytest.raises(NotRunnable, match="XR-Linear: not run: environment .venv/xmc/pecos could not be built"):
        m.fit(FitData(np.eye(3, dtype=np.float32), np.eye(3, dtype=np.uint8), None, None, list("abc")),
              RunContext(seed=0, workdir=tmp_path))
    # a changed lock is tried again
    with env.lock.open("a") as fh:
        fh.write("# edited\n")
    assert env.failure() is None
    assert build("XR-Linear").not_runnable_reason().startswith("environment .venv/xmc/pecos not built: run `make xmc-envs`")
    assert env.build_log.stat().st_mtime_ns == log_mtime


def test_a_missing_environment_is_not_built_behind_the_users_back(tmp_path, monkeypatch):
    root = _scratch_checkout(tmp_path)
    monkeypatch.setenv(ROOT_ENV, str(root))
    reason = build("napkinXC-PLT").not_runnable_reason()
    assert reason == ("environment .venv/xmc/napkinxc not built: run `make xmc-envs` "
                      "(or `make -f mk/xmc-envs.mk .venv/xmc/napkinxc/.installed`)")
    cfg = loader.load(ROOT / "config" / "mulan.yaml")
    assert plan.not_runnable(cfg, "bibtex", "napkinXC-PLT") == reason  # planning: the same, and nothing built
    assert not (root / ".venv").exists()
    (root / "requirements-libmultilabel.lock").unlink()
    assert build("LibMultiLabel-1vsRest").not_runnable_reason() == (
        f"lock file requirements-libmultilabel.lock not found in {root} (it pins .venv/xmc/libmultilabel)")


def test_lock_change_changes_the_run_spec(tmp_path, monkeypatch):
    """The lock's sha256 is part of the run spec (resolved_hparams): editing a lock re-runs
    that method's jobs and no other."""
    root = _scratch_checkout(tmp_path)
    monkeypatch.setenv(ROOT_ENV, str(root))
    cfg = loader.load(ROOT / "config" / "mulan.yaml")
    spec = {m: plan.run_spec(cfg, "bibtex", "clean", m) for m in ("XR-Linear", "napkinXC-PLT", "BCE")}
    rh = spec["XR-Linear"].resolved_hparams
    assert rh["env"] == ".venv/xmc/pecos" and rh["library"] == "libpecos==1.2.8"
    assert rh["env_lock_sha256"] == ExternalEnv.of("pecos").lock_sha256()
    with (root / "requirements-pecos.lock").open("a") as fh:
        fh.write("# edited\n")
    after = {m: plan.run_spec(cfg, "bibtex", "clean", m) for m in spec}
    assert after["XR-Linear"].sha256() != spec["XR-Linear"].sha256()
    assert after["napkinXC-PLT"].sha256() == spec["napkinXC-PLT"].sha256()
    assert after["BCE"].sha256() == spec["BCE"].sha256()


# ------------------------------------------------------------------------ worker protocol


@pytest.mark.slow
def test_worker_errors_and_death_are_reported(tmp_path):
    env = require_env("napkinxc")
    c = WorkerClient(env, "napkinXC-PLT")
    with pytest.raises(WorkerError, match="napkinXC-PLT: .venv/xmc/napkinxc worker failed in 'predict': "
                                          "RuntimeError: predict before fit"):
        c.predict(np.eye(2, dtype=np.float32), 1)
    assert c.request(cmd="exit") == {"ok": True}
    with pytest.raises(WorkerError, match="has exited|died during 'predict'"):
        c.predict(np.eye(2, dtype=np.float32), 1)
    c.close()
    c = WorkerClient(env, "napkinXC-PLT")
    c.proc.kill()
    c.proc.wait()
    with pytest.raises(WorkerError, match="has exited|died"):
        c.fit(np.eye(2, dtype=np.float32), np.eye(2, dtype=np.uint8), {}, 0)
    tmp = c.tmp
    c.close()
    assert not Path(tmp).exists()


def test_topk_helpers_order_and_padding():
    idx, score = topk_rows([[4, 1, 7], [], [2, 0]], [[0.5, 0.5, 0.9], [], [0.1, 0.3]], 3)
    assert idx.tolist() == [[7, 1, 4], [-1, -1, -1], [0, 2, -1]]
    assert score.tolist() == [[0.9, 0.5, 0.5], [0.0, 0.0, 0.0], [0.3, 0.1, 0.0]]
    idx, score = topk_dense(np.array([[0.2, 0.7, 0.7, -1.0]]), 3)
    assert idx.tolist() == [[1, 2, 0]] and score.tolist() == [[0.7, 0.7, 0.2]]
