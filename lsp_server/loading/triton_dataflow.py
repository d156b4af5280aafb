"""Reads a real Inductor Triton kernel's lines as statements for the data flow (statement_flow): `tmpN = ...`
definitions, `tl.store`s through the kernel's pointers, and reductions: persistent ones (`tl.sum(tmp5, 1)`, their
input padded by `tl.where(xmask, tmp3, 0)`), looped ones folding into an accumulator (`_tmp2 = tl.full(...)`,
`tmp3 = triton_helpers.maximum(_tmp2, tmp1)`, `_tmp2 = tl.where(r0_mask & xmask, tmp3, _tmp2)`, then
`triton_helpers.max2(_tmp2, 1)`) and Welford's (`tmp3_mean`, `tmp3_m2`, `tmp3_weight`)."""
from __future__ import annotations

import re
from itertools import pairwise

from lsp_server.loading.cpp_statements import TRITON, TRITON_VARIABLE
from lsp_server.loading.statement_flow import Statement, split_arguments
from lsp_server.loading.statement_flow import statement_owners as flow_owners

VARIABLE = re.compile(TRITON_VARIABLE + r"\b")
DEFINITION = re.compile(rf"^\s*(?P<targets>{TRITON_VARIABLE}(?:\s*,\s*{TRITON_VARIABLE})*)\s*=(?!=)(?P<rhs>.*)$")
STORE = re.compile(r"^\s*tl\.store\((?P<args>.*)$")
POINTER = re.compile(r"\b((?:in_out|in|out)_ptr\d+)\b")
DEF = re.compile(r"^def\s+\w+\((?P<params>.*)\)\s*:")
ACCUMULATOR = re.compile(r"^(?P<key>_tmp\d+|tmp\d+_(?:mean|m2|weight))$")  # a looped reduction's running value
WELFORD_STATE = re.compile(r"_(?:mean|m2|weight)$")
# The calls that reduce (to be told from the combine ops a looped reduction also calls): `tl.sum(tmp5, 1)`.
REDUCING = re.compile(r"\b(?:tl\.sum|triton_helpers\.(?:max2|min2|prod|welford|welford_reduce|welford_combine|"
                      r"any|all)|tl\.(?:max|min|reduce))\(")
NUMBER = re.compile(r"tl\.full\(\[[^\]]*\],\s*(?P<full>-?[\d.]+(?:e[+-]?\d+)?)\b"
                    r"|float\(\"(?P<inf>-?)inf\"\)|^\s*(?P<bare>-?[\d.]+(?:e[+-]?\d+)?)\s*$")


def accumulator_key(name: str) -> str | None:
    """`_tmp2` -> `_tmp2`; `tmp3_mean`, `tmp3_m2`, `tmp3_weight` -> `tmp3_welford` (one Welford reduction)."""
    found = ACCUMULATOR.match(name)
    if found is None:
        return None
    return WELFORD_STATE.sub("_welford", name)


def constants(rhs: str) -> frozenset[str]:
    """`tl.full([1, 1], 0.5, tl.float32)`, `float("-inf")` and `0.5` as FX prints them: "0.5", "-inf"."""
    found = set()
    for number in NUMBER.finditer(rhs):
        text = number["full"] or number["bare"]
        if text:
            try:
                found.add(str(float(text)))
            except ValueError:
                continue
        else:
            found.add(f"{number['inf']}inf")
    return frozenset(found)


def kernel_pointers(body: list[str], launch_args: list[str]) -> dict[str, str]:
    """The kernel's parameters (its `def`, in order) -> the launch's arguments in that order: its pointers'."""
    for text in body:
        found = DEF.match(text)
        if found is not None:
            params = [p.split(":", 1)[0].strip() for p in found["params"].split(",")]
            return {p: a for p, a in zip(params, launch_args) if POINTER.fullmatch(p)}
    return {}


def read_statement(index: int, text: str, indexing: frozenset[str] | set[str] = frozenset()) -> Statement | None:
    """One Triton line as a statement (None: indexing, masks and other lines the data flow skips). A variable in
    `indexing` only computes addresses (an embedding's `tmp7 = tl.where(tmp6, tmp5, tmp3)`): no node's op."""
    store = STORE.match(text)
    if store is not None:
        args = split_arguments(store["args"])
        target = POINTER.search(args[0])
        value = args[1] if len(args) > 1 else ""
        if target is None:
            return None
        return Statement(index, "store", operands=tuple(VARIABLE.findall(value)),
                         pointers=tuple(POINTER.findall(value)), constants=constants(value), target=target.group(1))
    found = DEFINITION.match(text)
    if found is None:
        return None
    targets = tuple(t.strip() for t in found["targets"].split(","))
    rhs = found["rhs"]
    variables = VARIABLE.findall(rhs)
    own = [accumulator_key(t) for t in targets if accumulator_key(t)]
    read_keys = [k for v in variables if (k := accumulator_key(v))]
    operands = tuple(v for v in variables if v not in targets and not accumulator_key(v))
    ops = frozenset() if set(targets) <= indexing else TRITON.ops(rhs)
    reading = {"operands": operands, "pointers": tuple(POINTER.findall(rhs)), "ops": ops}
    if own and own[0] not in read_keys:  # `_tmp2 = tl.full(...)`, `tmp3_m2 = tl.zeros(...)`: it starts
        return Statement(index, "declare", targets, own[0])
    if own:  # `_tmp2 = tl.where(r0_mask & xmask, tmp3, _tmp2)`
        return Statement(index, "update", targets, own[0], **reading)
    if read_keys:  # `tmp3 = triton_helpers.maximum(_tmp2, tmp1)`, `tmp2 = triton_helpers.max2(_tmp2, 1)`
        return Statement(index, "update", targets, read_keys[0], **reading)
    if REDUCING.search(rhs):  # a persistent reduction: an accumulator of its own
        return Statement(index, "update", targets, targets[0], **reading)
    fill = TRITON.masked_where is not None and bool(TRITON.masked_where.search(rhs)) and not reading["ops"]
    return Statement(index, "define", targets, constants=frozenset() if fill else constants(rhs), fill=fill,
                     **reading)


def triton_statements(body: list[str]) -> list[Statement]:
    """The statements of the kernel's function, in order."""
    lines = logical_lines(body)
    indexing = address_variables([text for _, text in lines])
    return [s for index, text in lines if (s := read_statement(index, text, indexing)) is not None]


def logical_lines(body: list[str]) -> list[tuple[int, str]]:
    """The lines of the kernel's function (after its `def`: the decorator and imports are not), a call split over
    lines (`triton_helpers.welford_reduce(` and its arguments below) joined into its first."""
    start = next((i + 1 for i, text in enumerate(body) if DEF.match(text)), len(body))
    joined: list[tuple[int, str]] = []
    depth = 0
    for index in range(start, len(body)):
        text = body[index]
        if depth > 0:
            joined[-1] = (joined[-1][0], joined[-1][1] + " " + text.strip())
        else:
            joined.append((index, text))
        depth = max(depth + text.count("(") + text.count("[") - text.count(")") - text.count("]"), 0)
    return joined


ADDRESSED = re.compile(r"\btl\.(?:load|store)\(|\btl\.device_assert\(")


def address_variables(lines: list[str]) -> set[str]:
    """The variables read only to compute addresses: in a load's or store's pointer argument, a bounds check, or
    an address variable's own definition (read backwards: a variable's uses come after it)."""
    uses: dict[str, list[bool]] = {}  # variable -> for each use, whether it computes an address
    found: set[str] = set()
    for text in reversed(lines):
        call = ADDRESSED.search(text)
        definition = DEFINITION.match(text)
        if call is not None:
            args = split_arguments(text[call.end():])
            for variable in VARIABLE.findall(args[0] if "device_assert" not in call.group(0) else text):
                uses.setdefault(variable, []).append(True)
            if definition is None and "store" in call.group(0):
                for variable in VARIABLE.findall(",".join(args[1:2])):
                    uses.setdefault(variable, []).append(False)
            if definition is None:
                continue
        if definition is None:
            continue
        targets = [t.strip() for t in definition["targets"].split(",")]
        address = all(uses.get(t) and all(uses[t]) for t in targets)
        if address:
            found.update(targets)
        rhs = definition["rhs"] if call is None else definition["rhs"][:definition["rhs"].find("tl.load(")]
        for variable in VARIABLE.findall(rhs):
            uses.setdefault(variable, []).append(address)
    return found


def statement_owners(body: list[str], nodes: list[tuple[str, str, list[str]]], launch_args: list[str],
                     buffers: dict[str, frozenset[str]] | None = None,
                     graph_args: dict[str, list[str]] | None = None) -> dict[int, list[str]]:
    """Index into `body` (a Triton kernel's lines) -> the node it computes; see statement_flow.statement_owners."""
    owners = flow_owners(triton_statements(body), TRITON, nodes, kernel_pointers(body, launch_args), buffers,
                         graph_args)
    lines = [index for index, _ in logical_lines(body)] + [len(body)]
    for first, after in pairwise(lines):  # a call's continuation lines are its statement's
        owners.update({index: owners[first] for index in range(first + 1, after) if first in owners})
    return owners
