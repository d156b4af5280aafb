"""Which FX node a statement of a real Inductor C++ kernel computes.

Inductor's CPU kernels carry no per-statement origin (no `// Corresponding FX code line` as ours have, no
source-node comment inside the kernel), but a kernel's statements follow its nodes in topological order.
Statements whose C++ names an op (`std::tanh(tmp2)`, `tmp0 * tmp1`, `max_propagate_nan(...)`) anchor that
order; any other statement (a broken one, say `bad_tanh(tmp2)`) belongs to the node between its anchored
neighbours, never to the kernel's first node by default.
"""
from __future__ import annotations

import re

TMP_DEFINITION = re.compile(r"\btmp(?P<number>\d+)\s*=(?!=)")
CALLED = re.compile(r"([A-Za-z_][\w:]*)\s*\(")
BINARY = re.compile(r"\btmp\d+\)?\s*([*/+-])\s*[\w(]")  # a value's arithmetic, not an index's (`in_ptr0 + x0`)
UNARY_MINUS = re.compile(r"(?:^|[=(,])\s*-\s*[\w(]")
OPERATORS = {"*": "mul", "+": "add", "-": "sub", "/": "div"}
# C++ helper → the aten op it computes, where the names differ.
HELPERS = {"max_propagate_nan": "maximum", "min_propagate_nan": "minimum", "neg": "neg"}
# aten op → the names its statement may show instead of its own.
SPELLINGS: dict[str, frozenset[str]] = {
    "relu": frozenset({"max", "maximum", "clamp_min"}),
    "neg": frozenset({"neg", "sub"}),
    "rsub": frozenset({"sub"}),
    "true_divide": frozenset({"div"}),
    "reciprocal": frozenset({"div", "reciprocal"}),
    "clamp": frozenset({"max", "min", "maximum", "minimum", "clamp"}),
    "sigmoid": frozenset({"exp", "sigmoid"}),
    "pow": frozenset({"pow", "mul"}),
    "where": frozenset({"where", "blendv"}),
}


def statement_ops(text: str) -> set[str]:
    """Op names a C++ statement shows: functions it calls (namespace dropped) and arithmetic operators."""
    rhs = text.split("=", 1)[1] if TMP_DEFINITION.search(text) else text
    ops = {HELPERS.get(name.rsplit("::", 1)[-1], name.rsplit("::", 1)[-1]) for name in CALLED.findall(rhs)}
    ops |= {OPERATORS[op] for op in BINARY.findall(rhs)}
    if UNARY_MINUS.search(rhs):
        ops.add("neg")
    return ops


def computes(op: str, ops: set[str]) -> bool:
    return op in ops or bool(SPELLINGS.get(op, frozenset()) & ops)


def kernel_statements(lines: list[str], failing: int) -> tuple[list[str], int] | None:
    """The statements of the loop holding line `failing` (an index into `lines`) and its index among them:
    each `tmpN = ...` definition, the failing line itself always. A vectorised kernel repeats its statements
    for the tail loop (tmp0 again): only the run of definitions around the failing line counts."""
    runs: list[list[tuple[int, str]]] = [[]]
    last = -1
    for index, text in enumerate(lines):
        found = TMP_DEFINITION.search(text)
        if found is not None:
            number = int(found["number"])
            if number <= last and runs[-1]:
                runs.append([])
            last = number
        if found is not None or index == failing:
            runs[-1].append((index, text))
    for run in runs:
        for position, (index, _) in enumerate(run):
            if index == failing:
                return [text for _, text in run], position
    return None


def statement_node(statements: list[str], failing: int, nodes: list[tuple[str, str]]) -> str | None:
    """The node (name) statement `failing` computes; `nodes`: the kernel's (name, op) in topological order."""
    if not nodes or not 0 <= failing < len(statements):
        return None
    anchors: dict[int, int] = {}
    at = 0
    for position, text in enumerate(statements):
        ops = statement_ops(text)
        matching = [k for k in range(at, len(nodes)) if computes(nodes[k][1], ops)]
        fresh = [k for k in matching if k not in anchors.values()]  # a second `mul` is the next mul node
        if matching:
            anchors[position] = at = (fresh or matching)[0]
    if failing in anchors:
        return nodes[anchors[failing]][0]
    before = max((k for p, k in anchors.items() if p < failing), default=-1)
    after = min((k for p, k in anchors.items() if p > failing), default=len(nodes))
    used = set(anchors.values())
    between = [k for k in range(before + 1, after) if k not in used] or list(range(before + 1, after))
    if between:
        return nodes[between[0]][0]
    return nodes[before][0] if before >= 0 else nodes[0][0]
