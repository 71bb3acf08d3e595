"""The command line shared by the training-variant builders (:mod:`.r_variant`,
:mod:`.noise`, :mod:`.occlusion`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from cdgtmll.data.processed import ProcessedData
from cdgtmll.io import sha256_file, write_json


def variant_main(argv: Sequence[str] | None, *, prog: str, description: str,
                 add_arguments: Callable[[argparse.ArgumentParser], None],
                 apply: Callable[[ProcessedData, argparse.Namespace], tuple[ProcessedData, dict[str, Any]]]) -> int:
    """The command line shared by the training-variant builders (R-variants, label noise,
    occlusion): ``--in PROCESSED.npz``, the builder's own arguments, ``--out OUT.npz
    --bookkeeping OUT.json``. ``apply(data, args)`` returns the variant and its
    bookkeeping, to which the input's and the output's paths and sha256 are added. Bad
    input (a ``ValueError``) prints ``error: ...`` and exits 2 with nothing written."""
    ap = argparse.ArgumentParser(prog=prog, description=description)
    ap.add_argument("--in", dest="inp", required=True, help="processed dataset (.npz)")
    add_arguments(ap)
    ap.add_argument("--out", required=True, help="output processed dataset (.npz)")
    ap.add_argument("--bookkeeping", required=True, help="output bookkeeping (.json)")
    args = ap.parse_args(argv)
    try:
        out, book = apply(ProcessedData.load(args.inp), args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    book["source"] = {"path": str(args.inp), "sha256": sha256_file(args.inp)}
    out.save(args.out)
    book["output"] = {"path": str(args.out), "sha256": sha256_file(args.out)}
    write_json(args.bookkeeping, book)
    return 0
