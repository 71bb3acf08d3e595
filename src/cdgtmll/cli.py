"""``cdgtmll`` command line: helpers around the Snakemake pipeline.

  cdgtmll check-config config/config.yaml     validate a config (schema + registries)
  cdgtmll methods                             list registered methods
  cdgtmll datasets                            list the dataset registry
  cdgtmll audit PATH [--cell ROW COLUMN]      trace a table cell or figure to its inputs
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="cdgtmll", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("check-config", help="validate a config file")
    p.add_argument("path")
    sub.add_parser("methods", help="list registered methods")
    sub.add_parser("datasets", help="list registered datasets")
    p = sub.add_parser("audit", help="trace a table cell or a figure back to its inputs, re-verifying hashes")
    p.add_argument("path", help="a table (.md/.csv/.tex) or figure (.pdf/.png/.csv) written by the pipeline")
    p.add_argument("--cell", nargs=2, metavar=("ROW", "COLUMN"), help='e.g. CD-GTMLL "Yeast Rare-F1"')
    args = ap.parse_args(argv)

    if args.cmd == "check-config":
        from cdgtmll.config import ConfigError, load

        try:
            cfg = load(args.path)
        except ConfigError as exc:
            print(exc, file=sys.stderr)
            return 2
        print(f"{args.path}: valid (profile '{cfg['name']}', datasets {cfg['experiments']['datasets']}, "
              f"methods {cfg['experiments']['methods']})")
        return 0
    if args.cmd == "audit":
        from cdgtmll.audit import audit

        try:
            rep = audit(args.path, tuple(args.cell) if args.cell else None)
        except (FileNotFoundError, KeyError) as exc:
            print(f"audit: {exc}", file=sys.stderr)
            return 2
        print("\n".join(rep.lines))
        if rep.problems:
            print("\nAUDIT FAILED:", file=sys.stderr)
            for p_ in rep.problems:
                print(f"  {p_}", file=sys.stderr)
            return 1
        return 0
    if args.cmd == "methods":
        from cdgtmll.methods import base

        for name in base.available():
            cls = base.get(name)
            print(f"{name:16s} {cls.description}")
        return 0
    if args.cmd == "datasets":
        from cdgtmll.data import registry

        for spec in (registry.get_spec(n) for n in registry.available()):
            loader = spec.loader or "loader not implemented yet"
            print(f"{spec.name:16s} {spec.kind:8s} {spec.format:12s} L={spec.n_labels}  {loader}")
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
