"""The resources each workflow rule asks a cluster for, as a Markdown table, read from the rules.

    python tools/rule_resources.py            # print the table
    python tools/rule_resources.py --write    # rewrite the block in docs/cluster.md

Reads ``workflow/rules/*.smk`` as text: for every ``rule``, its ``threads:`` and the entries of
its ``resources:`` block, written as in the rule (an expression such as ``train_gpu`` stays an
expression and is explained below the table). Rules without resources (the target rules) are
left out. ``tests/unit/test_docs.py`` checks that docs/cluster.md holds the table this prints.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "workflow" / "rules"
TARGET = ROOT / "docs" / "cluster.md"
BEGIN = "<!-- resources:begin (tools/rule_resources.py writes this block) -->"
END = "<!-- resources:end -->"
#: what the expressions in the rules mean (workflow/rules/common.smk, data.smk)
EXPLAIN = {
    "train_gpu": "1 for a neural method when `experiments.device` is `cuda`, or `auto` with `cluster: true` "
                 "(profiles/slurm), but with `auto` on a tabular dataset of known size only from "
                 "`cluster_resources.gpu_min_cells` training rows x labels (below, the job trains on the CPU); "
                 "else 0 (classical methods: always 0)",
    "FEATURE_GPUS": "1 when `experiments.device` is `cuda`, or `auto` with `cluster: true`, else 0",
    "train_time": "240 min; image fine-tuning: computed from its size, epochs and seeds (below)",
    "more_train_time": "as `train_time`, for the seeds a powered run trains besides `experiments.seeds` (config `power`)",
    "train_cpus": "for an image dataset fine-tuned end to end `FEATURE_CPUS`, else 1",
    "FEATURE_CPUS": "1 + `image_backbone.workers`; with `workers: auto` (the default), "
                    "`cluster_resources.image_job_cpus` (default 10), of which the job runs all but one as workers",
}


def rule_resources(rules_dir: Path = RULES) -> list[dict]:
    """One record per rule with resources: name, file, threads, resources (name -> text)."""
    out = []
    for smk in sorted(rules_dir.glob("*.smk")):
        rule, section, rec = None, None, None
        for line in smk.read_text().splitlines():
            if m := re.match(r"^(?:rule|checkpoint)\s+(\w+)\s*:", line):
                rule, section = m.group(1), None
                rec = {"rule": rule, "file": smk.name, "threads": "1", "resources": {}}
                out.append(rec)
                continue
            if rec is None or not line.strip() or line.lstrip().startswith("#"):
                continue
            if not line.startswith(" "):  # top-level code ends the rule
                rule, rec, section = None, None, None
                continue
            if m := re.match(r"^    (\w+):\s*(.*?)\s*(?:#.*)?$", line):
                section = m.group(1)
                if section == "threads":
                    rec["threads"] = m.group(2).rstrip(",")
                continue
            if section == "resources" and (m := re.match(r"^        (\w+)=(.*?),?\s*(?:#.*)?$", line)):
                rec["resources"][m.group(1)] = m.group(2).strip().rstrip(",")
    return [r for r in out if r["resources"]]


def minutes(text: str) -> str:
    try:
        m = int(text)
    except ValueError:
        return text
    return f"{m} min" if m < 60 else f"{m // 60} h" if m % 60 == 0 else f"{m // 60} h {m % 60} min"


def render(records: list[dict]) -> str:
    rows = ["| rule (file) | mem_mb | runtime | threads | gpu | cpus_per_task |", "|---|---|---|---|---|---|"]
    used = set()
    for r in records:
        res = r["resources"]

        def cell(key: str, r=r, res=res) -> str:
            v = res.get(key, "-") if key != "threads" else r["threads"]
            if v in EXPLAIN:
                used.add(v)
            return f"`{v}`" if v in EXPLAIN else v
        extra = sorted(set(res) - {"mem_mb", "runtime", "gpu", "cpus_per_task"})
        name = f"`{r['rule']}` ({r['file']})" + (f"; also {', '.join(extra)}" if extra else "")
        runtime = cell("runtime") if res.get("runtime") in EXPLAIN else minutes(res.get("runtime", "-"))
        rows.append(f"| {name} | {res.get('mem_mb', '-')} | {runtime} | {cell('threads')} | "
                    f"{cell('gpu')} | {cell('cpus_per_task')} |")
    notes = [f"- `{k}`: {EXPLAIN[k]}." for k in EXPLAIN if k in used]
    return "\n".join([BEGIN, *rows, "", *notes, END])


def write(block: str, target: Path = TARGET) -> None:
    text = target.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"rule_resources: {target} has no '{BEGIN}' ... '{END}' block to replace")
    pre, rest = text.split(BEGIN, 1)
    target.write_text(pre + block + rest.split(END, 1)[1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true", help=f"rewrite the block in {TARGET.relative_to(ROOT)}")
    args = ap.parse_args(argv)
    block = render(rule_resources())
    if args.write:
        write(block)
    else:
        print(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
