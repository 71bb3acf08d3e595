"""The one definition of what a dataset, method, alias or plugin-method name may be.

Such a name becomes a folder (``results/data/<dataset>/``, ``results/runs/<dataset>/<variant>/
<method>/``) and a Snakemake wildcard value. A name the wildcard's pattern does not match makes no
job at all: Snakemake then stops late with a bare ``MissingInputException`` naming no config key;
a name with ``/`` or ``..`` would put files outside their folder. So the same patterns are used
twice, from here: by the config check (:func:`name_problem`, naming the key) and by the
``wildcard_constraints`` of ``workflow/rules/common.smk`` (:data:`DATASET_WILDCARD`,
:data:`METHOD_WILDCARD`), and they cannot drift apart.

A name starts with a letter or digit and continues with letters, digits, ``_``, ``-`` and
``.`` (never two dots in a row): no ``/``, no ``..``, no whitespace, no control characters.
A method in a list may add one-off overrides after ``@`` (``CD-GTMLL@alpha=0.7,n_players=5``).
Display names (``data.custom.<name>.display_name``) are text for people and may hold anything.
"""

from __future__ import annotations

import re
import unicodedata

#: a dataset, alias or registered method name (module docstring)
NAME = r"[A-Za-z0-9](?:[A-Za-z0-9_\-]|\.(?!\.))*"
#: the ``@key=value[,key=value]`` suffix of a one-off method override
OVERRIDE = r"@(?:[A-Za-z0-9_=,@\-]|\.(?!\.))+"
#: Snakemake wildcard constraints (``workflow/rules/common.smk``)
DATASET_WILDCARD = NAME
METHOD_WILDCARD = NAME + f"(?:{OVERRIDE})?"

_NAME_RE = re.compile(NAME)
_METHOD_RE = re.compile(METHOD_WILDCARD)

#: where each kind of name is a wildcard value, for the message
WHERE = {
    "dataset": "wildcard {dataset} of rule prepare_dataset (results/data/{dataset}/processed.npz) and every later rule",
    "method": "wildcard {method} of rule train (results/runs/{dataset}/{variant}/{method}/) and every later rule",
}


def _why(name: str) -> str:
    """The first thing wrong with ``name`` in words (it does not match the pattern)."""
    if name == "":
        return "it is empty"
    if name != name.strip():
        return "it has whitespace at its start or end"
    for ch in name:
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            return f"it holds the control character U+{ord(ch):04X}"
    if "/" in name or "\\" in name:
        return "it holds a path separator"
    if ".." in name:
        return "it holds '..'"
    if not name[0].isascii() or not name[0].isalnum():
        return f"it starts with {name[0]!r}, not a letter or digit"
    bad = sorted({ch for ch in name if not (ch.isascii() and (ch.isalnum() or ch in "_-."))})
    return f"it holds {', '.join(repr(c) for c in bad)}"


def name_problem(name: object, kind: str = "dataset") -> str | None:
    """Why ``name`` cannot be a ``kind`` name (``dataset``, ``alias``, ``method``: a registered
    name; ``method-entry``: a method list entry, ``@`` overrides allowed), or None when it can.
    The text names the pattern and the rule and wildcard it would break."""
    if not isinstance(name, str):
        return f"expected a name (text), got {type(name).__name__} {name!r}"
    entry = kind == "method-entry"
    if (_METHOD_RE if entry else _NAME_RE).fullmatch(name):
        return None
    pattern = METHOD_WILDCARD if entry else NAME
    where = WHERE["dataset" if kind == "dataset" else "method"]
    base = name.partition("@")[0] if entry else name
    if _NAME_RE.fullmatch(base):
        why = f"its '@' overrides {name.partition('@')[2]!r} hold characters other than letters, digits, _ - . = ,"
    else:
        why = _why(base)
    what = "an '@' override" if entry and base != name and _NAME_RE.fullmatch(base) else "a name"
    return (f"{kind.replace('-entry', '')} name {name!r}: {why}. It becomes a folder and the value of the "
            f"{where}, so {what} must match {pattern}: letters, digits, '_', '-' and '.', starting with a "
            "letter or digit, no '..'" + (" ('=' and ',' too after the '@')" if entry else ""))
