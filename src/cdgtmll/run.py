"""Train one (dataset, variant, method) job for every configured seed.

``python -m cdgtmll.run --data VARIANT.npz --clean CLEAN.npz --spec SPEC.json --outdir DIR``

One job trains all seeds in one process (a fresh Python process with torch costs
about 3 s; see shared notes), and writes per seed, under ``DIR/seed<k>/``:

* ``predictions.npz`` – validation and test probabilities (float64) and row indices,
* ``provenance.json`` – git state, run-spec hash, input hashes, seed, packages, device,
* anything the method writes into its work dir (``train_log.csv``, checkpoints, ...).

Files are written atomically; a seed whose ``predictions.npz`` exists and whose
recorded spec hash matches is skipped, so a killed job resumes where it stopped.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from cdgtmll import provenance
from cdgtmll.config import config_hash
from cdgtmll.data.processed import ProcessedData
from cdgtmll.io import atomic_path, read_json, write_json
from cdgtmll.labels import tail_labels
from cdgtmll.methods import FitData, RunContext, base


def build_method(name: str, hparams: dict, training: dict) -> base.Method:
    """Instantiate ``name`` with its hyper-parameters plus those keys of the dataset's
    training protocol (epochs, batch_size, learning rates, ...) that its constructor
    accepts; classical methods accept none of them and ignore the protocol."""
    cls = base.get(name)
    accepted = set(inspect.signature(cls.__init__).parameters)
    merged = {k: v for k, v in training.items() if k in accepted}
    merged.update(hparams)
    return base.build(name, merged)


def set_seed(seed: int) -> None:
    import random

    random.seed(seed)
    np.random.seed(seed)
    if "torch" in sys.modules:
        import torch

        torch.manual_seed(seed)


def run_seed(data: ProcessedData, tail: np.ndarray, spec: dict, seed: int, outdir: Path,
             inputs: dict[str, Path], progress: bool = False) -> Path:
    spec_sha = config_hash(spec)
    pred_path = outdir / "predictions.npz"
    prov_path = outdir / "provenance.json"
    if pred_path.exists() and prov_path.exists():
        try:
            if read_json(prov_path).get("config_sha256") == spec_sha:
                print(f"[run] seed {seed}: up to date, skipped", flush=True)
                return pred_path
        except (OSError, ValueError):
            pass
    outdir.mkdir(parents=True, exist_ok=True)
    started = provenance.now()
    t0 = time.perf_counter()
    X_tr, Y_tr = data.part("train")
    X_va, Y_va = data.part("val")
    X_te, _ = data.part("test")
    fit = FitData(X_tr, Y_tr, X_va, Y_va, data.label_names, tail=tail)
    set_seed(seed)
    method = build_method(spec.get("registered_method", spec["method"]), spec["hparams"], spec["training"])
    ctx = RunContext(seed=seed, workdir=outdir, device=spec.get("device", "auto"), progress=progress,
                     extra={"training": spec["training"]})
    method.fit(fit, ctx)
    fit_seconds = time.perf_counter() - t0
    s_val = np.asarray(method.predict_proba(X_va), dtype=np.float64)
    s_test = np.asarray(method.predict_proba(X_te), dtype=np.float64)
    for split, s in (("val", s_val), ("test", s_test)):
        if s.shape != (data.splits[split].size, data.n_labels):
            raise ValueError(f"{spec['method']}: predict_proba returned {s.shape} for split '{split}', "
                             f"expected {(data.splits[split].size, data.n_labels)}")
        if not np.all(np.isfinite(s)) or s.min() < 0 or s.max() > 1:
            raise ValueError(f"{spec['method']}: predict_proba returned values outside [0, 1] on '{split}'")
    extra = method.extra_outputs()
    if extra:
        write_json(outdir / "method_outputs.json", extra)
    arrays = {"val": s_val, "test": s_test, "idx_val": data.splits["val"], "idx_test": data.splits["test"]}
    own = method.decision_thresholds()
    if own is not None:
        own = np.broadcast_to(np.asarray(own, dtype=np.float64), (data.n_labels,)).copy()
        arrays["method_thresholds"] = own
    with atomic_path(pred_path, suffix=".npz") as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **arrays)
    rec = provenance.record(spec=spec, spec_sha256=spec_sha, inputs=inputs, seed=seed,
                            device=str(getattr(method, "device", ctx.device)), started=started,
                            extra={"fit_seconds": round(fit_seconds, 3),
                                   "data_sources": data.meta.get("source_files")})
    write_json(prov_path, rec)
    print(f"[run] {spec['dataset']}/{spec['variant']}/{spec['method']} seed {seed}: "
          f"fit {fit_seconds:.1f}s", flush=True)
    return pred_path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, type=Path, help="processed dataset (clean or R-variant)")
    ap.add_argument("--clean", required=True, type=Path, help="clean processed dataset (defines the tail)")
    ap.add_argument("--spec", required=True, help="run spec as JSON text or @file")
    ap.add_argument("--outdir", required=True, type=Path)
    ap.add_argument("--progress", action="store_true")
    args = ap.parse_args(argv)
    spec = json.loads(Path(args.spec[1:]).read_text() if args.spec.startswith("@") else args.spec)
    threads = os.environ.get("CDGTMLL_THREADS")
    if threads:
        import torch

        torch.set_num_threads(int(threads))
    data = ProcessedData.load(args.data)
    clean = ProcessedData.load(args.clean)
    tail = tail_labels(clean.part("train")[1], q=spec["r_variants"]["tail_fraction"],
                       tie_seed=spec["r_variants"]["tie_seed"])
    inputs = {"data": args.data, "clean": args.clean}
    for seed in spec["seeds"]:
        run_seed(data, tail, spec, seed, args.outdir / f"seed{seed}", inputs, args.progress)
    return 0


if __name__ == "__main__":
    sys.exit(main())
