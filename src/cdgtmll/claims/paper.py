"""The paper side of the claims check: the packaged claims table ``paper_claims.csv``
(:func:`read_claims`) and the parser of the paper's Tables 1-3 in its LaTeX source
(:func:`extract_table_cells`, :func:`table_claims`; dev entry point
``python -m cdgtmll.claims.check --extract-tables PAPER.tex``). The columns of the claims
table are documented in :mod:`cdgtmll.claims`.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from cdgtmll.claims.verdict import KINDS
from cdgtmll.variants.naming import setting_id

CLAIMS_CSV = Path(__file__).with_name("paper_claims.csv")
CLAIM_COLUMNS = ["claim_id", "location", "line", "quote", "kind", "dataset", "setting", "metric", "method",
                 "other_method", "paper_value", "paper_value_hi", "comparator", "mode", "in_comment", "notes"]
#: names printed differently in the paper
METHOD_ALIASES = {"EUT": "ETU", "CD--GTMLL": "CD-GTMLL"}


# ============================================================== paper source: table extraction

TABLE_DATASETS = {
    "Pascal VOC": "voc2007", "Pascal VOC-R": "voc2007", "COCO": "coco2014", "COCO-R": "coco2014",
    "Yeast": "yeast", "Yeast-R": "yeast", "Mediamill": "mediamill", "Mediamill-R": "mediamill",
    "Eurlex-4K": "eurlex-4k", "Wiki10-31K": "wiki10-31k", "AmazonCat-13K": "amazoncat-13k",
}
TABLE_METRICS = {"mAP": "mAP", "Rare-F1": "rare_f1", "Micro-F1": "micro_f1", "Macro-F1": "macro_f1",
                 "P@1": "p@1", "P@3": "p@3", "P@5": "p@5"}
#: the tables whose cells are claims; Table 2's columns are severities of Rare-F1
TABLE_LABELS = ("tab:main_standard", "tab:main_rare", "tab:xmc")
TABLE_SHORT = {"tab:main_standard": "T1", "tab:main_rare": "T2", "tab:xmc": "T3"}

_COMMENT = re.compile(r"(?<!\\)%.*$")
_WRAP = re.compile(r"\\(textbf|underline|emph|textit)\{([^{}]*)\}")


def _strip_comment(line: str) -> str:
    return _COMMENT.sub("", line)


def clean_method_name(cell: str) -> str:
    """'PE~\\citep{x}' -> 'PE'; '\\textbf{CD--GTMLL}' -> 'CD-GTMLL'; 'EUT' -> 'ETU'."""
    s = re.sub(r"~?\\cite[pt]?\{[^}]*\}", "", cell)
    while _WRAP.search(s):
        s = _WRAP.sub(r"\2", s)
    s = s.replace("--", "-").strip()
    return METHOD_ALIASES.get(s, s)


def _cell_value(cell: str) -> tuple[str, str]:
    """'\\underline{91.9}' -> ('91.9', 'second'); '\\textbf{92.7}' -> ('92.7', 'best')."""
    s = cell.strip()
    mark = ""
    m = re.fullmatch(r"\\(textbf|underline)\{(.*)\}", s)
    if m:
        mark = "best" if m.group(1) == "textbf" else "second"
        s = m.group(2).strip()
    return s, mark


def _rows_with_lines(lines: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """Split (line number, text) into LaTeX table rows ending in '\\\\'; each row is a list of
    (line number of the cell's first character, cell text)."""
    rows, cells, buf, buf_line = [], [], "", None
    for no, text in lines:
        pos = 0
        while pos <= len(text):
            amp = text.find("&", pos)
            end = text.find("\\\\", pos)
            cut = min([i for i in (amp, end) if i >= 0], default=-1)
            piece = text[pos:] if cut < 0 else text[pos:cut]
            if piece.strip() and buf_line is None:
                buf_line = no
            buf += piece
            if cut < 0:
                buf += " "
                break
            cells.append((buf_line if buf_line is not None else no, buf.strip()))
            buf, buf_line = "", None
            if cut == end:
                rows.append(cells)
                cells = []
                pos = cut + 2
            else:
                pos = cut + 1
    return rows


def extract_table_cells(tex_path: str | Path) -> list[dict]:
    """Every numeric cell of the paper's Tables 1-3, parsed from the LaTeX source.

    Returns dicts with ``table`` (label), ``line`` (1-based source line of the cell), ``method``
    (cleaned row name), ``group`` / ``column`` (header titles as printed), ``dataset``,
    ``setting``, ``metric``, ``printed`` (the number as printed), ``value`` (float, percent) and
    ``mark`` ('best' / 'second' / '').
    """
    src = Path(tex_path).read_text(encoding="utf-8").splitlines()
    out: list[dict] = []
    i = 0
    while i < len(src):
        if not re.match(r"\s*\\begin\{table\*?\}", src[i]):
            i += 1
            continue
        j = i
        while not re.match(r"\s*\\end\{table\*?\}", src[j]):
            j += 1
        body = [(k + 1, _strip_comment(src[k])) for k in range(i, j + 1)]
        label = next((m.group(1) for _, t in body for m in [re.search(r"\\label\{([^}]*)\}", t)] if m), None)
        i = j + 1
        if label not in TABLE_LABELS:
            continue
        mid = next(k for k, (_, t) in enumerate(body) if "\\midrule" in t)
        bottom = next(k for k, (_, t) in enumerate(body) if "\\bottomrule" in t)
        header = " ".join(t for _, t in body[:mid])
        groups = [(int(n), title.strip()) for n, title in re.findall(r"\\multicolumn\{(\d+)\}\{\w+\}\{([^}]*)\}", header)]
        last_cmid = max(k for k, (_, t) in enumerate(body[:mid]) if "\\cmidrule" in t)
        sub_rows = _rows_with_lines(body[last_cmid + 1:mid])
        subs = [c for _, c in sub_rows[0]][1:]
        columns = []
        for n, title in groups:
            for _ in range(n):
                columns.append((title, subs[len(columns)]))
        for row in _rows_with_lines(body[mid + 1:bottom]):
            method = clean_method_name(row[0][1])
            if len(row) - 1 != len(columns):
                raise ValueError(f"{label}: row '{method}' has {len(row) - 1} cells, header has {len(columns)}")
            for (no, cell), (title, sub) in zip(row[1:], columns):
                printed, mark = _cell_value(cell)
                if label == "tab:main_rare":
                    sev = float(re.fullmatch(r"@(\d+)\\%", sub.strip()).group(1)) / 100
                    setting, metric = setting_id("R", sev), "rare_f1"
                else:
                    setting, metric = "clean", TABLE_METRICS[sub.strip()]
                out.append({"table": label, "line": no, "method": method, "group": title,
                            "column": sub.replace("\\%", "%").strip(), "dataset": TABLE_DATASETS[title],
                            "setting": setting, "metric": metric, "printed": printed,
                            "value": float(printed), "mark": mark})
    return out


def table_claims(tex_path: str | Path) -> pd.DataFrame:
    """The table-cell rows of ``paper_claims.csv``, generated from the LaTeX source."""
    recs = []
    for c in extract_table_cells(tex_path):
        short = TABLE_SHORT[c["table"]]
        col = c["setting"] if c["table"] == "tab:main_rare" else c["metric"]
        recs.append({
            "claim_id": f"{short}:{c['dataset']}:{col}:{c['method']}",
            "location": f"{c['table']}: row {c['method']}, column {c['group']} / {c['column']}",
            "line": c["line"], "quote": c["printed"], "kind": "value", "dataset": c["dataset"],
            "setting": c["setting"], "metric": c["metric"], "method": c["method"], "other_method": "",
            "paper_value": c["value"], "paper_value_hi": np.nan, "comparator": "=", "mode": "global",
            "in_comment": False,
            "notes": "; ".join(filter(None, [
                "printed as 'EUT' in the paper" if c["method"] == "ETU" else "",
                {"best": "bold (best) in the paper", "second": "underlined (second) in the paper"}.get(c["mark"], ""),
            ])),
        })
    return pd.DataFrame(recs, columns=CLAIM_COLUMNS)


# ============================================================== the claims table

def read_claims(path: str | Path = CLAIMS_CSV) -> pd.DataFrame:
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = set(CLAIM_COLUMNS) - set(df.columns)
    if missing:
        raise ValueError(f"{path}: claims table lacks columns {sorted(missing)}")
    for c in ("paper_value", "paper_value_hi"):
        df[c] = pd.to_numeric(df[c].replace("", np.nan))
    df["line"] = pd.to_numeric(df["line"].replace("", np.nan)).astype("Int64")
    df["in_comment"] = df["in_comment"].str.lower().isin(("true", "1", "yes"))
    bad = set(df["kind"]) - set(KINDS)
    if bad:
        raise ValueError(f"{path}: unknown claim kinds {sorted(bad)}")
    if df["claim_id"].duplicated().any():
        raise ValueError(f"{path}: duplicate claim ids {sorted(df.loc[df['claim_id'].duplicated(), 'claim_id'])}")
    return df
