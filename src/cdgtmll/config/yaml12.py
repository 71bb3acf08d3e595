"""The YAML loader of the configuration files: PyYAML's ``SafeLoader`` with two changes.

* Floats are resolved as YAML 1.2's core schema does, so ``lr_backbone: 1e-3`` is the number
  0.001 (YAML 1.1, which PyYAML implements, needs a dot and a signed exponent, ``1.0e-3``, and
  reads ``1e-3`` as a string). Accepted: ``1e-3``, ``1E+5``, ``.5``, ``-.5``, ``1.``,
  ``-2.0e10``, ``.inf``, ``-.inf``, ``.nan``, and every float YAML 1.1 accepts (``1_000.5``,
  ``1:30.0``). Everything else (integers, booleans such as ``yes``/``no``, null, timestamps,
  strings) is resolved exactly as ``SafeLoader`` resolves it.
* A key set twice in one mapping is an error (:class:`DuplicateKeyError`) naming the key, its
  dotted path and the lines of both, instead of the second value silently winning. Keys
  brought in by a ``<<`` merge may be overridden, as YAML intends.

``yaml.load(text, Loader=Yaml12Loader)``, or :func:`load`.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

FLOAT_TAG = "tag:yaml.org,2002:float"
MERGE_TAG = "tag:yaml.org,2002:merge"

#: YAML 1.2 core-schema floats (without the integers, which the int resolver keeps) and YAML
#: 1.1's floats (what SafeLoader accepts): ``SafeConstructor.construct_yaml_float`` reads both
FLOAT_RE = re.compile(
    r"""^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?[0-9]+[eE][-+]?[0-9]+
        |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
    re.X,
)


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A key set twice in one mapping. ``key``: the key as written; ``path``: its dotted path
    (``training.yeast.epochs``); ``line``, ``first_line``: 1-based lines of the duplicate and of
    the first setting; ``column``, ``first_column``: 1-based columns."""

    def __init__(self, key: str, path: str, first: yaml.Mark, dup: yaml.Mark) -> None:
        self.key, self.path = key, path
        self.line, self.column = dup.line + 1, dup.column + 1
        self.first_line, self.first_column = first.line + 1, first.column + 1
        super().__init__(None, None, f"found duplicate key '{key}' (at '{path}'), {self.where()}", dup)

    def where(self) -> str:
        """``at line 7 (first set at line 4)``; with columns where both are on one line."""
        if self.line == self.first_line:
            return f"at line {self.line}, column {self.column} (first set at line {self.first_line}, column {self.first_column})"
        return f"at line {self.line} (first set at line {self.first_line})"


class Yaml12Loader(yaml.SafeLoader):
    """``SafeLoader`` with YAML 1.2 core-schema floats and duplicate keys as errors."""

    # the float resolver keeps its place (before int) with the wider pattern
    yaml_implicit_resolvers = {
        first: [(tag, FLOAT_RE if tag == FLOAT_TAG else rx) for tag, rx in resolvers]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_document(self, node: Node) -> Any:
        self._check_duplicate_keys(node)
        return super().construct_document(node)

    def _check_duplicate_keys(self, root: Node) -> None:
        seen_nodes: set[int] = set()
        stack: list[tuple[Node, str]] = [(root, "")]
        while stack:
            node, path = stack.pop()
            if id(node) in seen_nodes:  # an alias of a node already checked
                continue
            seen_nodes.add(id(node))
            if isinstance(node, SequenceNode):
                stack.extend((item, f"{path}[{i}]") for i, item in reversed(list(enumerate(node.value))))
            elif isinstance(node, MappingNode):
                first: dict[Any, Node] = {}
                children = []
                for key_node, value_node in node.value:
                    if key_node.tag == MERGE_TAG:
                        continue
                    label = str(key_node.value) if isinstance(key_node, ScalarNode) else "<complex key>"
                    key_path = f"{path}.{label}" if path else label
                    children.append((value_node, key_path))
                    if not isinstance(key_node, ScalarNode):
                        continue
                    key = self.construct_object(key_node)
                    try:
                        earlier = first.setdefault(key, key_node)
                    except TypeError:  # unhashable: the constructor says so
                        continue
                    if earlier is not key_node:
                        raise DuplicateKeyError(label, key_path, earlier.start_mark, key_node.start_mark)
                stack.extend(reversed(children))


def load(text: str) -> Any:
    """Parse one YAML document with :class:`Yaml12Loader`."""
    return yaml.load(text, Loader=Yaml12Loader)  # noqa: S506 (a SafeLoader subclass)
