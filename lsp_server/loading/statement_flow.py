"""Which FX node each statement of a real Inductor kernel computes, from the kernel's data flow: the core shared by
the C++ (cpp_dataflow) and Triton (triton_dataflow) readers, which turn a kernel's lines into `Statement`s.

Inductor's kernels carry no per-statement origin; what they do carry is their variable names: each `tmpN = ...`
reads earlier `tmpM`s, loads read the kernel's pointers (whose buffers the launch in `call()` names: `arg0_1` is a
graph input), stores write them, and reductions fold into accumulators. A statement whose op a node of the kernel
computes (the flavor's `Vocabulary.computes`: C++ `exp()` or Triton `libdevice.exp` is `exp`, or `sigmoid`'s) is
that node when exactly one such node reads what the statement reads (the nodes its operands were found to compute,
the inputs its loads read); where the records leave several, the statement is answered "one of" them, never a
guess. Statements that compute no op (loads, constants, broadcasts, casts) pass their operands' values through.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from lsp_server.loading.cpp_statements import REDUCTIONS, Vocabulary


@dataclass(frozen=True)
class Statement:
    """One line of a kernel as the data flow reads it. kind: define (`tmp3 = tmp1 * tmp2`), declare (a reduction's
    accumulator starts), update (an accumulator, or a reduction of its own, takes a value), store, alias (a pointer
    named twice), end (a loop closes: the stores made inside it are seen from here on)."""

    index: int
    kind: Literal["define", "declare", "update", "store", "alias", "end"]
    defined: tuple[str, ...] = ()
    accumulator: str = ""  # declare/update: the accumulator's key
    operands: tuple[str, ...] = ()  # the variables it reads
    pointers: tuple[str, ...] = ()  # the kernel pointers it reads
    constants: frozenset[str] = frozenset()  # its numbers as FX prints them ("1.0", "-inf")
    ops: frozenset[str] = frozenset()
    target: str = ""  # store: the pointer written; alias: the new name; end: unused
    source: str = ""  # alias: the pointer it names
    loop: int | None = None  # store: the innermost loop around it; end: the loop closing
    fill: bool = False  # Triton's `tl.where(xmask, tmp3, 0)`: a reduction's input padded with its identity


@dataclass
class Node:
    name: str
    op: str
    args: list[str]


@dataclass
class Flow:
    """What the kernel's variables hold while its statements are read in order."""

    nodes: list[Node]
    vocabulary: Vocabulary
    pointers: dict[str, str]  # kernel parameter -> the buffer or graph input the launch passes
    values: dict[str, frozenset[str]] = field(default_factory=dict)  # variable -> nodes/inputs it holds
    stored: dict[str, frozenset[str]] = field(default_factory=dict)  # pointer -> what was stored there
    owner: dict[str, list[str]] = field(default_factory=dict)  # accumulator -> its reduction node(s)
    reduced: set[str] = field(default_factory=set)  # reductions an accumulator of the kernel computed
    deep: dict[str, frozenset[str]] = field(default_factory=dict)  # variable -> everything it was computed from
    aliases: dict[str, str] = field(default_factory=dict)  # `auto out_ptr3 = in_out_ptr0;`: out_ptr3 -> in_out_ptr0
    graph_args: dict[str, list[str]] = field(default_factory=dict)  # every node of the graph -> what it reads


def split_arguments(inside: str) -> list[str]:
    """The top-level arguments of a call's text after its `(` (up to its matching `)`)."""
    out, depth, current = [], 0, ""
    for ch in inside:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            if depth == 0:
                break
            depth -= 1
        if ch == "," and depth == 0:
            out.append(current)
            current = ""
        else:
            current += ch
    out.append(current)
    return out


def launch_arguments(line: str) -> list[str]:
    """`cpp_fused_x(buf9, arg0_1, reinterpret_tensor(buf2, ...))` or `triton_x.run(buf9, arg0_1, 64, ...)` ->
    [buf9, arg0_1, buf2] / [buf9, arg0_1, ""] (a number passes no buffer)."""
    names = []
    for arg in split_arguments(line[line.index("(") + 1:] if "(" in line else ""):
        found = re.match(r"\s*([A-Za-z_]\w*)", arg.replace("reinterpret_tensor(", ""))
        names.append(found.group(1) if found else "")
    return names


def reads(flow: Flow, statement: Statement) -> frozenset[str]:
    """What a statement reads: its operands' values, its loads' buffers, its constants."""
    found: set[str] = set(statement.constants)
    for name in statement.operands:
        found |= flow.values.get(name, frozenset())
    for pointer in statement.pointers:
        pointer = flow.aliases.get(pointer, pointer)
        found |= flow.stored.get(pointer) or {flow.pointers.get(pointer, pointer)}
    return frozenset(found)


def candidates(flow: Flow, ops: frozenset[str], read: frozenset[str], accumulator: bool,
               operands: tuple[str, ...] = (), direct: bool = False) -> list[Node]:
    """The kernel's nodes that compute one of `ops` (a reduction only in an accumulator's statement) from what
    the statement reads: those reading most of it (its operands' nodes, inputs and constants). An accumulator
    whose input was not recognised takes the one reduction of its op no other accumulator took. `direct`: only
    nodes reading some of it themselves."""
    named = [n for n in flow.nodes if flow.vocabulary.computes(n.op, ops) and (n.op in REDUCTIONS) == accumulator]
    overlap = {n.name: len(set(n.args) & read) for n in named}
    best = max(overlap.values(), default=0)
    if direct and best == 0:
        return []
    known = {a for n in flow.nodes for a in n.args} | {n.name for n in flow.nodes}
    if best == 0 and not read & known:  # it reads only what no node names (another kernel's buffer): by op alone
        return named if not accumulator or len(named) == 1 else []
    if best == 0 and flow.graph_args:  # what it reads through nodes no statement computes (views, gathers, getitem)
        wide = {n.name: len(expanded(flow, n.args) & read) for n in named}
        best = max(wide.values(), default=0)
        for depth in range(1, DEPTH + 1) if best > 0 else ():  # the node reaching it in the fewest steps
            near = [n for n in named if len(expanded(flow, n.args, depth) & read) == best]
            if near:
                return near
    if best == 0:
        if accumulator:
            taken = {name for owners in flow.owner.values() for name in owners} | flow.reduced
            free = [n for n in named if n.name not in taken]
            return free if len(free) == 1 else []
        return named if not read or len(named) == 1 else []  # the kernel's one node of its op: what else
    tied = [n for n in named if overlap[n.name] == best]
    if len(tied) > 1 and operands:  # `x * x` is the node reading x twice, not the one reading x and x²
        counts = Counter(v for t in operands for v in flow.values.get(t, frozenset()))
        twice = {n.name: sum(min(c, counts[a]) for a, c in Counter(n.args).items()) for n in tied}
        most = max(twice.values())
        tied = [n for n in tied if twice[n.name] == most]
    return tied


DEPTH = 3  # how many nodes back a statement's reads are looked for


def expanded(flow: Flow, args: list[str], depth: int = DEPTH) -> set[str]:
    """A node's arguments and, `depth` steps back, theirs (a view's, a gather's, a tuple's part's inputs)."""
    found, frontier = set(args), list(args)
    for _ in range(depth):
        frontier = [a for name in frontier for a in flow.graph_args.get(name, [])]
        found.update(frontier)
    return found


@dataclass
class Walk:
    """The bookkeeping of one pass over a kernel's statements."""

    owners: dict[int, list[str]] = field(default_factory=dict)  # statement index -> its node(s)
    defined_at: dict[str, Statement] = field(default_factory=dict)  # variable -> the statement defining it
    pending: dict[str, list[int]] = field(default_factory=dict)  # accumulator -> declarations (its update's node)
    updated: dict[str, bool] = field(default_factory=dict)  # accumulator -> an update was read since its declaration
    waiting: dict[int, dict[str, frozenset[str]]] = field(default_factory=dict)  # a loop's stores, seen after it ends


def statement_owners(statements: list[Statement], vocabulary: Vocabulary, nodes: list[tuple[str, str, list[str]]],
                     pointers: dict[str, str], buffers: dict[str, frozenset[str]] | None = None,
                     graph_args: dict[str, list[str]] | None = None) -> dict[int, list[str]]:
    """Statement index -> the node it computes ([one] when the records decide it, several: "one of").
    `buffers`: what earlier calls left in the graph's buffers (buffer -> nodes); this kernel's stores are added.
    `graph_args`: every node of the graph and what it reads (to see through the nodes no statement computes)."""
    flow = Flow([Node(*n) for n in nodes], vocabulary, pointers, graph_args=dict(graph_args or {}))
    buffers = {} if buffers is None else buffers
    flow.stored = {param: buffers[buffer] for param, buffer in flow.pointers.items() if buffer in buffers}
    walk = Walk()
    for statement in statements:
        STEPS[statement.kind](flow, walk, statement)
    constant_owners(statements, walk.owners)
    for waiting_stores in walk.waiting.values():
        flow.stored.update(waiting_stores)
    by_name = {n.name for n in flow.nodes}
    for param, buffer in flow.pointers.items():  # what the kernel wrote, for the kernels after it
        if param.startswith(("out_ptr", "in_out_ptr")) and flow.stored.get(param):
            buffers[buffer] = frozenset(n for n in flow.stored[param] if n in by_name) or flow.stored[param]
    return walk.owners


def end_loop(flow: Flow, walk: Walk, statement: Statement) -> None:
    flow.stored.update(walk.waiting.pop(statement.loop or 0, {}))


def alias(flow: Flow, walk: Walk, statement: Statement) -> None:
    flow.aliases[statement.target] = statement.source


def store(flow: Flow, walk: Walk, statement: Statement) -> None:
    pointer = flow.aliases.get(statement.target, statement.target)
    stored = reads(flow, statement)
    if statement.loop is None:
        flow.stored[pointer] = stored
    else:  # a later iteration of the same loop (C++'s vector tail) still reads what was there before
        walk.waiting.setdefault(statement.loop, {})[pointer] = stored


def declare(flow: Flow, walk: Walk, statement: Statement) -> None:
    """A new reduction starts on this accumulator; its declarations belong to the node its first update names."""
    key = statement.accumulator
    if walk.updated.pop(key, False):
        walk.pending.pop(key, None)  # the last one's declarations, whose updates went unrecognised
    flow.reduced |= set(flow.owner.get(key, []))
    flow.owner[key] = []
    walk.pending.setdefault(key, []).append(statement.index)


def update(flow: Flow, walk: Walk, statement: Statement) -> None:
    key = statement.accumulator
    walk.updated[key] = True
    read = reads(flow, statement)
    deep = read.union(*(flow.deep.get(t, frozenset()) for t in statement.operands))
    fits = next((found for reading, direct in ((read, True), (deep, True), (read, False), (deep, False))
                 if (found := candidates(flow, statement.ops, reading, True, direct=direct))), [])
    if fits and not flow.owner.get(key):
        flow.owner[key] = [n.name for n in fits]
        for declared in walk.pending.pop(key, []):
            walk.owners[declared] = list(flow.owner[key])
    if flow.owner.get(key):
        walk.owners[statement.index] = list(flow.owner[key])
        claim_inner(flow, walk, flow.owner[key], list(statement.operands))
    for name in statement.defined:
        flow.values[name] = frozenset(flow.owner.get(key, [])) or read


def define(flow: Flow, walk: Walk, statement: Statement) -> None:
    read = reads(flow, statement)
    fits = candidates(flow, statement.ops, read, False, statement.operands) if statement.ops else []
    deep = read.union(*(flow.deep.get(t, frozenset()) for t in statement.operands))
    for name in statement.defined:
        walk.defined_at[name] = statement
        flow.deep[name] = deep
        flow.values[name] = frozenset(n.name for n in fits) if fits else read
    if fits:
        walk.owners[statement.index] = [n.name for n in fits]


def constant_owners(statements: list[Statement], owners: dict[int, list[str]]) -> None:
    """A constant's own line (Triton's `tmp1 = tl.full([1, 1], 0.5, tl.float32)`) is the node(s) of the statements
    reading it: a division by 8 is a multiplication by this 0.125."""
    constant = {s.defined[0]: s for s in statements if s.kind == "define" and s.defined and s.constants
                and not (s.operands or s.pointers or s.ops) and s.index not in owners}
    found: dict[int, list[str]] = {}
    for statement in statements:
        for name in statement.operands if statement.index in owners else ():
            if name in constant:
                held = found.setdefault(constant[name].index, [])
                held += [n for n in owners[statement.index] if n not in held]
    owners.update(found)


STEPS = {"define": define, "declare": declare, "update": update, "store": store, "alias": alias, "end": end_loop}


def claim_inner(flow: Flow, walk: Walk, reduction: list[str], operands: list[str]) -> None:
    """The statements between a reduction's input and its accumulator are the reduction's own (a variance's
    `x - mean` and its square, Triton's padding of the input with the reduction's identity): an operand whose
    nodes are not what the reduction reads is its, back to them."""
    by_name = {n.name: n for n in flow.nodes}
    inputs = {a for name in reduction if name in by_name for a in by_name[name].args}
    stack = list(operands)
    while stack:
        variable = stack.pop()
        statement = walk.defined_at.get(variable)
        if statement is None:
            continue
        held = flow.values.get(variable, frozenset())
        if not statement.fill and (held & inputs or not held & set(by_name)):
            continue  # the reduction's input itself, or a load/constant
        walk.owners[statement.index] = list(reduction)
        flow.values[variable] = frozenset(reduction)
        stack += statement.operands
