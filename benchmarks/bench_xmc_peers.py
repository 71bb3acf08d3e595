r"""XMC peers side by side: P@1/3/5, training wall time and peak RSS of BCE, CD-GTMLL,
XR-Linear, napkinXC-PLT and LibMultiLabel-1vsRest on Delicious and Bibtex, in one run.

    python benchmarks/bench_xmc_peers.py [--datasets delicious bibtex] [--methods ...]
                                         [--seed 0] [--threads 1] [--epochs N] [--workdir DIR]

Per dataset the data are prepared as the ``prepare_dataset`` rule does (MULAN files from the
mirror, ``CDGTMLL_DATA_MIRROR``; official test split; 10% of the official training rows
as the validation split, seed 0). Per (dataset, method) one fresh child process does what
``cdgtmll.train`` does for one seed: the method built from ``config/mulan.yaml`` (its
hyper-parameters and the dataset's training protocol: 100 epochs, B = 256, MLP d' = 512;
``--epochs`` overrides, for quick tries only), ``fit`` on the training split (timed: training
wall time), ``predict_proba`` on the test split, P@1/3/5 (:func:`cdgtmll.metrics.definitions.precision_at_k`).
Threads: ``--threads`` (default 1, the ``train`` rule's ``CDGTMLL_THREADS``) for torch and
for every library that takes a thread count (PECOS; napkinXC and LibMultiLabel train on one
thread by default, see docs/methods.md).

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
    """Child: build, fit (timed), predict, P@k (module docstring)."""
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
    t0 = time.perf_counter()
    m.fit(FitData(Xtr, Ytr, Xva, Yva, D.label_names), RunContext(seed=seed, workdir=workdir, device="cpu"))
    fit_s = time.perf_counter() - t0
    driver_mb = vm_hwm_mb()
    ext = (m.extra_outputs() or {}).get("external")
    S = np.asarray(m.predict_proba(Xte), dtype=np.float64)
    if hasattr(m, "close"):
        m.close()
    p = precision_at_k(Yte, S, ks=(1, 3, 5))
    out = {"dataset": dataset, "method": method, "n_train": int(len(Ytr)), "n_test": int(len(Yte)),
           "labels": int(Ytr.shape[1]), "fit_s": round(fit_s, 2), **{k: round(float(v), 4) for k, v in p.items()}}
    if ext:
        out.update(peak_rss_mb=ext["worker_peak_rss_mb"], driver_rss_mb=round(driver_mb, 1),
                   rss_of="worker", library=ext["versions"])
    else:
        out.update(peak_rss_mb=round(driver_mb, 1), rss_of="process")
    return out


def table(results: list[dict], datasets: list[str], methods: list[str]) -> str:
    by = {(r["dataset"], r["method"]): r for r in results}
    head = "| method | " + " | ".join(f"{d}: P@1 / P@3 / P@5 | {d}: train s | {d}: peak RSS MiB" for d in datasets) + " |"
    lines = [head, "|" + "---|" * (1 + 3 * len(datasets))]
    for m in methods:
        cells = []
        for d in datasets:
            r = by.get((d, m))
            if r is None or "error" in r:
                cells += ["failed" if r else "—", "", ""]
                continue
            rss = f"{r['peak_rss_mb']:.0f}" + (f" (driver {r['driver_rss_mb']:.0f})" if r.get("rss_of") == "worker" else "")
            cells += [f"{r['p@1']:.4f} / {r['p@3']:.4f} / {r['p@5']:.4f}", f"{r['fit_s']:.1f}", rss]
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
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}  {platform.node()}  {os.cpu_count()} CPUs  python "
          f"{platform.python_version()}  seed {args.seed}  threads {args.threads}  epochs "
          f"{args.epochs or 'profile'}", flush=True)
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
    print()
    print(table(results, args.datasets, args.methods))
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
