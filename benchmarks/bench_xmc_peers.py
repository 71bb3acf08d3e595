r"""XMC peers side by side: P@1/3/5, training CPU time and wall time, and peak RSS of BCE,
CD-GTMLL, XR-Linear, napkinXC-PLT and LibMultiLabel-1vsRest on Delicious and Bibtex, in one run.

    python benchmarks/bench_xmc_peers.py [--datasets delicious bibtex] [--methods ...]
                                         [--seed 0] [--threads 1] [--epochs N] [--workdir DIR]

Per dataset the data are prepared as the ``prepare_dataset`` rule does (MULAN files from the
mirror, ``CDGTMLL_DATA_MIRROR``; official test split; 10% of the official training rows
as the validation split, seed 0). Per (dataset, method) one fresh child process does what
``cdgtmll.train`` does for one seed: the method built from ``config/mulan.yaml`` (its
hyper-parameters and the dataset's training protocol: 100 epochs, B = 256, MLP d' = 512;
``--epochs`` overrides, for quick tries only), ``fit`` on the training split (timed, see below),
``predict_proba`` on the test split, P@1/3/5 (:func:`cdgtmll.metrics.definitions.precision_at_k`).
Threads: ``--threads`` (default 1, the ``train`` rule's ``CDGTMLL_THREADS``) for torch and
for every library that takes a thread count (PECOS; napkinXC and LibMultiLabel train on one
thread by default, see docs/methods.md).

Training time is measured twice, because on a shared machine the two differ:

* **fit CPU s**: the CPU time (user + system, all threads) spent on ``fit``. For BCE and
  CD-GTMLL that is ``getrusage(RUSAGE_SELF)`` of the child around ``fit`` (plus
  ``RUSAGE_CHILDREN`` of any process reaped during it; none is expected). For the three
  libraries it is the same for the child that drives the worker (writing the training rows
  to ``.npz``; it only waits while the worker trains) plus the worker's own CPU time of the
  library's training call, ``fit_cpu_seconds`` of its ``fit`` reply
  (:mod:`cdgtmll.external.worker_protocol`: ``time.process_time()`` around the call, which
  includes the import of the library, done by the workers on the first ``fit``; the worker's
  start-up with numpy/scipy and its reading of the ``.npz`` files are not in it, as the import
  of torch is not in BCE's). This is the number to compare speed by: other work on the machine
  changes it little. ``worker_life_cpu_s`` in the ``RESULT`` line is the worker's CPU over its
  whole life (start-up, fit, predict), read when the child reaps it: a bound on its share.
* **fit wall s (load)**: the wall time of ``fit``, with the 1-minute load average
  (``os.getloadavg``) right before and right after it. With a load above the number of cores
  other work competed for them, and the wall time says more about that work than about the
  method.

Peak RSS is the high-water mark of the process that trains (``VmHWM`` of
``/proc/<pid>/status`` right after ``fit``): the child for BCE and CD-GTMLL (torch and the
data included), the library's worker process in its own environment for the other three
(the library, numpy/scipy and the data it was sent; the child that drives it is listed
as "driver" beside it). ``ru_maxrss`` is not used: a process created by fork keeps its
parent's high-water mark across exec.

Output: one ``RESULT`` line per (dataset, method) with ``key=value`` fields, then a
Markdown table (methods x datasets) for the README.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("BCE", "CD-GTMLL", "XR-Linear", "napkinXC-PLT", "LibMultiLabel-1vsRest")
DATASETS = ("delicious", "bibtex")
PROFILE = ROOT / "config" / "mulan.yaml"


def vm_hwm_mb() -> float:
    """This process's peak resident memory (VmHWM), MiB."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmHWM in /proc/self/status")


def cpu_seconds(who: int) -> float:
    """User + system CPU seconds of ``getrusage(who)``."""
    ru = resource.getrusage(who)
    return ru.ru_utime + ru.ru_stime


def load1() -> float:
    """The 1-minute load average."""
    return round(os.getloadavg()[0], 2)


def fit_cpu(self_s: float, children_s: float, ext: dict | None) -> dict:
    """The fit's CPU seconds (module docstring): this process's and its reaped children's
    CPU during ``fit`` plus, for a library, its worker's CPU of the training call."""
    out = {"driver_cpu_s": round(self_s + children_s, 2)}
    worker = float(ext["worker_fit_cpu_seconds"]) if ext else 0.0
    if ext:
        out["worker_cpu_s"] = round(worker, 2)
    out["fit_cpu_s"] = round(self_s + children_s + worker, 2)
    return out


def machine() -> str:
    """CPUs, memory, Python/torch, and the commit of the checkout (``+dirty`` with local changes)."""
    from importlib import metadata

    with open("/proc/meminfo") as fh:
        mem = next((int(ln.split()[1]) / 1024 ** 2 for ln in fh if ln.startswith("MemTotal:")), 0.0)

    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""

    commit = git("rev-parse", "--short", "HEAD") or "?"
    dirty = "+dirty" if git("status", "--porcelain", "--untracked-files=no") else ""
    try:
        torch = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch = "?"
    return (f"{platform.node()}  {os.cpu_count()} CPUs  {mem:.1f} GiB  python {platform.python_version()}  "
            f"torch {torch}  commit {commit}{dirty}")


def prepare(dataset: str, workdir: Path) -> Path:
    from cdgtmll.config import loader
    from cdgtmll.data.prepare import prepare as prepare_data

    cfg = loader.load(PROFILE)
    out = workdir / "data" / dataset / "processed.npz"
    if not out.is_file():
        prepare_data(dataset, workdir / "raw", out, mirror=os.environ.get("CDGTMLL_DATA_MIRROR"),
                     allow_download=False, val_fraction=cfg["data"]["val_fraction"],
                     split_seed=cfg["data"]["split_seed"])
    return out


def one(method: str, dataset: str, data: Path, seed: int, threads: int, epochs: int | None) -> dict:
    """Child: build, fit (CPU and wall time, load before/after), predict, P@k (module docstring)."""
    os.environ["CDGTMLL_THREADS"] = str(threads)
    import numpy as np

    from cdgtmll.config import loader, plan
    from cdgtmll.data.processed import ProcessedData
    from cdgtmll.methods.base import FitData, RunContext, build_for_protocol
    from cdgtmll.metrics.definitions import precision_at_k
    from cdgtmll.train import set_seed

    if method in ("BCE", "CD-GTMLL"):
        import torch

        torch.set_num_threads(threads)
    cfg = loader.load(PROFILE)
    training = plan.training_protocol(cfg, dataset)
    if epochs is not None:
        training = {**training, "epochs": int(epochs)}
    D = ProcessedData.load(data)
    Xtr, Ytr = D.part("train")
    Xva, Yva = D.part("val")
    Xte, Yte = D.part("test")
    set_seed(seed)
    m = build_for_protocol(method, plan.method_hparams(cfg, dataset, method), training)
    workdir = data.parent / "runs" / method / f"seed{seed}"
    workdir.mkdir(parents=True, exist_ok=True)
    fit_data = FitData(Xtr, Ytr, Xva, Yva, D.label_names)
    ctx = RunContext(seed=seed, workdir=workdir, device="cpu")
    load_before = load1()
    c0, k0 = cpu_seconds(resource.RUSAGE_SELF), cpu_seconds(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    m.fit(fit_data, ctx)
    fit_s = time.perf_counter() - t0
    self_s = cpu_seconds(resource.RUSAGE_SELF) - c0
    children_s = cpu_seconds(resource.RUSAGE_CHILDREN) - k0
    load_after = load1()
    driver_mb = vm_hwm_mb()
    ext = (m.extra_outputs() or {}).get("external")
    S = np.asarray(m.predict_proba(Xte), dtype=np.float64)
    k1 = cpu_seconds(resource.RUSAGE_CHILDREN)
    if hasattr(m, "close"):
        m.close()
    p = precision_at_k(Yte, S, ks=(1, 3, 5))
    out = {"dataset": dataset, "method": method, "n_train": int(len(Ytr)), "n_test": int(len(Yte)),
           "labels": int(Ytr.shape[1]), **fit_cpu(self_s, children_s, ext), "fit_s": round(fit_s, 2),
           "load_before": load_before, "load_after": load_after, **{k: round(float(v), 4) for k, v in p.items()}}
    if ext:
        # the worker's whole life (start-up, fit, predict), reaped by close(): a bound on worker_cpu_s
        out.update(worker_life_cpu_s=round(cpu_seconds(resource.RUSAGE_CHILDREN) - k1, 2),
                   worker_fit_s=ext["worker_fit_seconds"], peak_rss_mb=ext["worker_peak_rss_mb"],
                   driver_rss_mb=round(driver_mb, 1), rss_of="worker", library=ext["versions"])
    else:
        out.update(peak_rss_mb=round(driver_mb, 1), rss_of="process")
    return out


#: the table's columns per dataset
COLUMNS = ("P@1 / P@3 / P@5", "fit CPU s", "fit wall s (load before→after)", "peak RSS MiB")


def table(results: list[dict], datasets: list[str], methods: list[str]) -> str:
    """Markdown: one row per method, the four :data:`COLUMNS` per dataset."""
    by = {(r["dataset"], r["method"]): r for r in results}
    head = "| method | " + " | ".join(f"{d}: {c}" for d in datasets for c in COLUMNS) + " |"
    lines = [head, "|" + "---|" * (1 + len(COLUMNS) * len(datasets))]
    for m in methods:
        cells = []
        for d in datasets:
            r = by.get((d, m))
            if r is None or "error" in r:
                cells += ["failed" if r else "—"] + [""] * (len(COLUMNS) - 1)
                continue
            rss = f"{r['peak_rss_mb']:.0f}" + (f" (driver {r['driver_rss_mb']:.0f})" if r.get("rss_of") == "worker" else "")
            cells += [f"{r['p@1']:.4f} / {r['p@3']:.4f} / {r['p@5']:.4f}", f"{r['fit_cpu_s']:.1f}",
                      f"{r['fit_s']:.1f} ({r['load_before']:.1f}→{r['load_after']:.1f})", rss]
        name = m + (" (not in the paper)" if m in ("napkinXC-PLT", "LibMultiLabel-1vsRest") else "")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS))
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=None, help="override the profile's epochs (quick tries only)")
    ap.add_argument("--workdir", type=Path, default=ROOT / "benchmarks" / "out" / "xmc_peers")
    ap.add_argument("--one", nargs=3, metavar=("METHOD", "DATASET", "DATA"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        method, dataset, data = args.one
        print("RESULT_JSON " + json.dumps(one(method, dataset, Path(data), args.seed, args.threads, args.epochs)),
              flush=True)
        return 0
    start = time.perf_counter()
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}  {machine()}  seed {args.seed}  "
          f"threads {args.threads}  epochs {args.epochs or 'profile'}  load {load1()}", flush=True)
    results = []
    for d in args.datasets:
        data = prepare(d, args.workdir)
        for m in args.methods:
            cmd = [sys.executable, __file__, "--one", m, d, str(data), "--seed", str(args.seed),
                   "--threads", str(args.threads)] + (["--epochs", str(args.epochs)] if args.epochs else [])
            t0 = time.perf_counter()
            res = subprocess.run(cmd, capture_output=True, text=True)
            line = next((ln for ln in res.stdout.splitlines() if ln.startswith("RESULT_JSON ")), None)
            if res.returncode != 0 or line is None:
                r = {"dataset": d, "method": m, "error": (res.stderr.strip().splitlines() or ["?"])[-1]}
            else:
                r = json.loads(line[len("RESULT_JSON "):])
            r["wall_s"] = round(time.perf_counter() - t0, 1)
            results.append(r)
            print("RESULT " + " ".join(f"{k}={json.dumps(v) if isinstance(v, dict) else v}" for k, v in r.items()),
                  flush=True)
    print(f"# done {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}  run wall "
          f"{time.perf_counter() - start:.0f} s  load {load1()}", flush=True)
    print()
    print(table(results, args.datasets, args.methods))
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
