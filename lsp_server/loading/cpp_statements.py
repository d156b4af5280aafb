"""Which FX node a statement of a real Inductor kernel computes: each kernel language's op vocabulary (C++, Triton),
and the op-order matching of C++ statements that g++ could not compile.

Inductor's CPU kernels carry no per-statement origin (no `// Corresponding FX code line` as ours have, no
source-node comment inside the kernel), but a kernel's statements follow its nodes in topological order.
Statements whose C++ names an op (`std::tanh(tmp2)`, `tmp0 * tmp1`, `max_propagate_nan(...)`) anchor that
order; any other statement (a broken one, say `bad_tanh(tmp2)`) belongs to the node between its anchored
neighbours, never to the kernel's first node by default.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

TMP_DEFINITION = re.compile(r"\btmp(?P<number>\d+)\s*=(?!=)")
CALLED = re.compile(r"([A-Za-z_][\w:]*)\s*\(")
BINARY = re.compile(r"\btmp(?:_acc)?\d+(?:_vec)?\)?\s*(==|!=|<=|>=|\|\||&&|[*/+|&<>-])\s*[\w(!]")  # not an index's
NOT = re.compile(r"(?:^|[=(,\s])[~!]\s*tmp")
UNARY_MINUS = re.compile(r"(?:^|[=(,])\s*-\s*[\w(]")
OPERATORS = {"*": "mul", "+": "add", "-": "sub", "/": "div", "|": "or", "||": "or", "&": "and", "&&": "and",
             "==": "eq", "!=": "ne", "<": "lt", ">": "gt", "<=": "le", ">=": "ge"}
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
    "rsqrt": frozenset({"rsqrt", "sqrt"}),  # `1 / std::sqrt(x)`
    "gelu": frozenset({"erf", "tanh", "mul"}),
    "pow": frozenset({"pow", "mul"}),
    "where": frozenset({"where", "blendv"}),
    # reductions, as their accumulator's update spells them
    "amax": frozenset({"maximum", "max"}), "amin": frozenset({"minimum", "min"}), "max": frozenset({"maximum"}),
    "min": frozenset({"minimum"}), "sum": frozenset({"add"}), "mean": frozenset({"add"}), "prod": frozenset({"mul"}),
    "any": frozenset({"or"}), "all": frozenset({"and"}),
    "var_mean": frozenset({"welford_combine", "welford_vec_reduce_all", "add"}),  # or its two sums
    "prepare_softmax_online": frozenset({"maximum", "max", "add", "sum"}),  # a softmax's max and sum in one pass
    "mul": frozenset({"and"}),  # of booleans
    "logical_and": frozenset({"and"}), "logical_or": frozenset({"or"}), "logical_not": frozenset({"not"}),
    "bitwise_and": frozenset({"and"}), "bitwise_or": frozenset({"or"}), "bitwise_not": frozenset({"not"}),
}


@dataclass(frozen=True)
class Vocabulary:
    """How one kernel language spells ops: its helpers' names, its operators, the names that compute no op."""

    helpers: dict[str, str]  # a called name -> the aten op it computes, where the names differ
    spellings: dict[str, frozenset[str]]  # aten op -> the names its statement may show instead of its own
    ignored: frozenset[str]  # calls that compute no node (loads, casts, broadcasts)
    binary: re.Pattern[str]
    unary_minus: re.Pattern[str]
    negation: re.Pattern[str]
    masked_where: re.Pattern[str] | None = None  # a `where` padding with a mask, not the `where` op

    def ops(self, rhs: str) -> frozenset[str]:
        """Op names a statement's right-hand side shows: functions it calls (namespace dropped), operators."""
        names = {name.rsplit("::", 1)[-1] for name in CALLED.findall(rhs)} - self.ignored
        if self.masked_where is not None and self.masked_where.search(rhs):
            names.discard("where")
        found = {self.helpers.get(name, name) for name in names}
        found |= {OPERATORS[op] for op in self.binary.findall(rhs)}
        if self.unary_minus.search(rhs):
            found.add("neg")
        if self.negation.search(rhs):
            found.add("not")
        return frozenset(found)

    def computes(self, op: str, ops: frozenset[str] | set[str]) -> bool:
        return op in ops or bool(self.spellings.get(op, frozenset()) & ops)


CPP = Vocabulary(HELPERS, SPELLINGS, frozenset(), BINARY, UNARY_MINUS, NOT)
TRITON_VARIABLE = r"(?<![\w.])_?tmp\d+(?:_\w+)?"
TRITON = Vocabulary(
    {"max2": "max", "min2": "min", "welford": "welford_reduce"},
    {**SPELLINGS, "div": frozenset({"div", "mul"}),  # by a constant: times its reciprocal
     "mean": frozenset({"add", "sum"}), "var_mean": frozenset({"add", "sum", "welford_reduce",
                                                                            "welford_combine"})},
    frozenset({"load", "store", "full", "zeros", "broadcast_to", "to", "arange", "program_id", "range", "float",
               "static_range", "device_assert", "debug_barrier", "promote_to_tensor", "reshape", "int"}),
    re.compile(TRITON_VARIABLE + r"(?:\[[^\]]*\])?\)?\s*(==|!=|<=|>=|[*/+|&<>-])\s*[\w(!~-]"),
    re.compile(r"(?:^|[=(,])\s*-\s*\(?" + TRITON_VARIABLE),
    re.compile(r"(?:^|[=(,\s])~\s*\(?" + TRITON_VARIABLE),
    re.compile(r"\bwhere\((?![^,]*" + TRITON_VARIABLE + ")"),  # its condition reads no variable: a mask
)


def statement_ops(text: str) -> set[str]:
    """Op names a C++ statement shows: functions it calls (namespace dropped) and arithmetic operators."""
    return set(CPP.ops(text.split("=", 1)[1] if TMP_DEFINITION.search(text) else text))


def computes(op: str, ops: set[str]) -> bool:
    return CPP.computes(op, ops)


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


# A vectorised loop's tail (`if(C10_UNLIKELY(x0 >= 24992L ...))`) repeats the main loop's statements.
TAIL = re.compile(r"\bC10_UNLIKELY\s*\(")
# `float tmp_acc0 = 0;` (a declaration: something before the name), `tmp_acc0_vec = tmp_acc0_vec + tmp0;`
ACCUMULATOR = re.compile(r"^(?P<declared>.*?)\btmp_acc(?P<number>\d+)(?:_vec|_arr)?\s*=(?!=)")
REDUCTIONS = frozenset({"sum", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "mean", "any", "all",
                        "var", "var_mean", "std", "logsumexp", "norm", "welford_reduce",
                        "prepare_softmax_online"})


@dataclass
class LoopRun:
    """The `tmpN = ...` definitions of one loop body (numbering restarts at each), and whether it is a tail."""

    tail: bool
    statements: list[tuple[int, str]] = field(default_factory=list)


def loop_runs(lines: list[str]) -> list[LoopRun]:
    runs: list[LoopRun] = []
    last, tail = -1, False
    for index, text in enumerate(lines):
        if TAIL.search(text):
            tail = True
            continue
        found = TMP_DEFINITION.search(text)
        if found is None:
            continue
        number = int(found["number"])
        if not runs or number <= last or tail:
            runs.append(LoopRun(tail))
            tail = False
        last = number
        runs[-1].statements.append((index, text))
    return runs


def anchor_run(run: LoopRun, nodes: list[tuple[str, str]], allowed: set[int] | None,
               used: set[int]) -> dict[int, int]:
    """Statement index -> node position, for the statements whose op names a node; a node another loop
    already computes is taken only when no other fits (a second `mul` loop is the next mul node)."""
    anchors: dict[int, int] = {}
    at = 0
    for index, text in run.statements:
        ops = statement_ops(text)
        matching = [k for k in range(at, len(nodes))
                    if (allowed is None or k in allowed) and computes(nodes[k][1], ops)]
        fresh = [k for k in matching if k not in used and k not in anchors.values()]
        if matching:
            anchors[index] = at = (fresh or matching)[0]
    return anchors


def accumulator_anchors(lines: list[str], nodes: list[tuple[str, str]]) -> dict[int, int]:
    """Statement index -> reduction node position for the reduction accumulators' statements: each declaration
    of a new `tmp_accN` starts the next reduction node; its updates and final combine belong to it."""
    reductions = [k for k, (_, op) in enumerate(nodes) if op in REDUCTIONS]
    anchors: dict[int, int] = {}
    if not reductions:
        return anchors
    owner: dict[int, int] = {}
    picked, last_declared = 0, None
    for index, text in enumerate(lines):
        found = ACCUMULATOR.search(text)
        if found is None:
            continue
        number, declared = int(found["number"]), bool(found["declared"].strip())
        if number not in owner or (declared and last_declared != number):
            owner[number] = reductions[min(picked, len(reductions) - 1)]
            picked += 1
        last_declared = number if declared else None
        anchors[index] = owner[number]
    return anchors


def statement_nodes(lines: list[str], nodes: list[tuple[str, str]]) -> list[tuple[int, str]]:
    """(index into `lines`, node name) for each statement of a C++ kernel body that computes one of `nodes`
    ((name, op) in topological order): op-named `tmpN = ...` definitions loop by loop (a tail loop maps as the
    loop it repeats) and the reduction accumulators' statements. Loads, constants and stores map to none."""
    anchors: dict[int, int] = {}
    used: set[int] = set()
    previous: set[int] = set()
    for run in loop_runs(lines):
        found = anchor_run(run, nodes, previous if run.tail else None, set() if run.tail else used)
        anchors.update(found)
        previous = set(found.values())
        used |= previous
    anchors.update(accumulator_anchors(lines, nodes))
    return [(index, nodes[k][0]) for index, k in sorted(anchors.items())]
