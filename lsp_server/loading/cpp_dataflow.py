"""Which FX node each statement of a real Inductor C++ kernel computes, from the kernel's own data flow.

Inductor's CPU kernels carry no per-statement origin; what they do carry is their variable names: each
`auto tmpN = ...` reads earlier `tmpM`s, loads read the kernel's pointers (whose buffers the launch in `call()`
names: `arg0_1` is a graph input), stores write them, and reductions fold into `tmp_accN`. A statement whose C++
op a node of the kernel computes (cpp_statements.computes: `exp()` is `exp`, or `sigmoid`'s) is that node when
exactly one such node reads what the statement reads (the nodes its operands were found to compute, the inputs
its loads read); where the records leave several, the statement is answered "one of" them, never a guess.
Statements that compute no op (loads, constants, broadcasts, casts) pass their operands' values through.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from lsp_server.loading.cpp_statements import REDUCTIONS, TAIL, computes, statement_ops

DEFINITION = re.compile(r"^\s*[A-Za-z_][\w:<>, ]*?\s+(?P<name>tmp(?:_acc)?\d+(?:_vec|_arr)?)\s*=(?!=)"
                        r"|^\s*(?P<update>tmp_acc\d+(?:_vec|_arr)?)\s*=(?!=)")
TMP = re.compile(r"\btmp(?:_acc)?\d+(?:_vec|_arr)?\b")
POINTER = re.compile(r"\b((?:in_out|in|out)_ptr\d+)\b")
STORE = re.compile(r"^\s*(?:(?P<ptr>(?:in_out|out)_ptr\d+)\s*\[.*?\]\s*=\s*(?P<value>.*);"
                   r"|(?P<vec>tmp\w+)\.store\(\s*(?P<vptr>(?:in_out|out)_ptr\d+))")
ALIAS = re.compile(r"^\s*auto\s+(?P<alias>(?:in_out|in|out)_ptr\d+)\s*=\s*(?P<target>(?:in_out|in|out)_ptr\d+)\s*;")
FOR = re.compile(r"^\s*for\s*\(")
BRACES = re.compile(r"[{}]")
SIGNATURE = re.compile(r"\b(?P<param>(?:in_out|in|out)_ptr\d+|ks\d+)\s*[,)]")


@dataclass
class Node:
    name: str
    op: str
    args: list[str]


@dataclass
class Flow:
    """What the kernel's variables hold while its statements are read in order."""

    nodes: list[Node]
    pointers: dict[str, str]  # kernel parameter -> the buffer or graph input the launch passes
    values: dict[str, frozenset[str]] = field(default_factory=dict)  # variable -> nodes/inputs it holds
    stored: dict[str, frozenset[str]] = field(default_factory=dict)  # pointer -> what was stored there
    owner: dict[str, list[str]] = field(default_factory=dict)  # accumulator -> its reduction node(s)
    reduced: set[str] = field(default_factory=set)  # reductions an accumulator of the kernel computed
    deep: dict[str, frozenset[str]] = field(default_factory=dict)  # variable -> everything it was computed from
    aliases: dict[str, str] = field(default_factory=dict)  # `auto out_ptr3 = in_out_ptr0;`: out_ptr3 -> in_out_ptr0
    graph_args: dict[str, list[str]] = field(default_factory=dict)  # every node of the graph -> what it reads


def kernel_pointers(body: list[str], launch_args: list[str]) -> dict[str, str]:
    """The kernel's pointer parameters (its signature, in order) -> the launch's arguments in that order."""
    signature = " ".join(body[:40]).split("{", 1)[0]
    params = [m["param"] for m in SIGNATURE.finditer(signature)]
    return dict(zip(params, launch_args))


def launch_arguments(line: str) -> list[str]:
    """`cpp_fused_x(buf9, arg0_1, reinterpret_tensor(buf2, ...))` -> [buf9, arg0_1, buf2]."""
    inside = line[line.index("(") + 1:] if "(" in line else ""
    out, depth, current = [], 0, ""
    for ch in inside:
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                break
            depth -= 1
        if ch == "," and depth == 0:
            out.append(current)
            current = ""
        else:
            current += ch
    out.append(current)
    names = []
    for arg in out:
        found = re.search(r"[A-Za-z_]\w*", arg.replace("reinterpret_tensor(", ""))
        names.append(found.group(0) if found else "")
    return names


NUMBER = re.compile(r"static_cast<[\w:]+>\((?P<number>-?[\d.]+(?:e[+-]?\d+)?)\)"
                    r"|(?P<inf>-?)std::numeric_limits<\w+>::infinity\(\)")


def constant(text: str) -> str | None:
    """A number as both sides write it: `static_cast<float>(1.0)` and FX's `1` are "1.0"."""
    try:
        return str(float(text))
    except ValueError:
        return None


def reads(flow: Flow, text: str, defined: str | None) -> frozenset[str]:
    """What a statement's right-hand side reads: its operands' values, its loads' buffers, its constants."""
    rhs = text.split("=", 1)[1] if "=" in text else text
    found: set[str] = set()
    for number in NUMBER.finditer(rhs):
        value = constant(number["number"]) if number["number"] else f"{number['inf']}inf"
        if value is not None:
            found.add(value.replace("--", ""))
    for name in TMP.findall(rhs):
        if name != defined:
            found |= flow.values.get(name, frozenset())
    for pointer in POINTER.findall(rhs):
        pointer = flow.aliases.get(pointer, pointer)
        found |= flow.stored.get(pointer) or {flow.pointers.get(pointer, pointer)}
    return frozenset(found)


def candidates(flow: Flow, ops: set[str], read: frozenset[str], accumulator: bool,
               operands: list[str] | None = None) -> list[Node]:
    """The kernel's nodes that compute one of `ops` (a reduction only in an accumulator's statement) from what
    the statement reads: those reading most of it (its operands' nodes, inputs and constants). An accumulator
    whose input was not recognised takes the one reduction of its op no other accumulator took."""
    named = [n for n in flow.nodes if computes(n.op, ops) and (n.op in REDUCTIONS) == accumulator]
    overlap = {n.name: len(set(n.args) & read) for n in named}
    best = max(overlap.values(), default=0)
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
        return named if not read else []
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


def statement_owners(body: list[str], nodes: list[tuple[str, str, list[str]]], launch_args: list[str],
                     buffers: dict[str, frozenset[str]] | None = None,
                     graph_args: dict[str, list[str]] | None = None) -> dict[int, list[str]]:
    """Index into `body` -> the node it computes ([one] when the records decide it, several: "one of").
    `buffers`: what earlier calls left in the graph's buffers (buffer -> nodes); this kernel's stores are added.
    `graph_args`: every node of the graph and what it reads (to see through the nodes no statement computes)."""
    flow = Flow([Node(*n) for n in nodes], kernel_pointers(body, launch_args), graph_args=dict(graph_args or {}))
    buffers = {} if buffers is None else buffers
    flow.stored = {param: buffers[buffer] for param, buffer in flow.pointers.items() if buffer in buffers}
    by_name = {n.name: n for n in flow.nodes}
    owners: dict[int, list[str]] = {}
    defined_at: dict[str, tuple[int, list[str]]] = {}  # variable -> its statement and the variables it reads
    pending: dict[str, list[int]] = {}  # accumulator -> its declarations, owned by its first update's node
    updated: dict[str, bool] = {}  # accumulator -> an update was read since its declaration
    blocks: list[int | None] = []  # open braces: the `for` loop each opens (its id), None for other blocks
    waiting: dict[int, dict[str, frozenset[str]]] = {}  # a loop's stores: seen by what reads after it ends
    loop_ids, header = iter(range(1, 1 << 30)), False
    for index, text in enumerate(body):
        header = header or bool(FOR.match(text))
        for brace in BRACES.findall(text.split("//", 1)[0]):
            if brace == "{":
                blocks.append(next(loop_ids) if header else None)
                header = False
            elif blocks and (done := blocks.pop()) is not None:
                flow.stored.update(waiting.pop(done, {}))
        if TAIL.search(text):
            continue
        alias = ALIAS.match(text)
        if alias is not None:
            flow.aliases[alias["alias"]] = alias["target"]
            continue
        store = STORE.match(text)
        if store is not None:
            pointer = store["ptr"] or store["vptr"]
            pointer = flow.aliases.get(pointer, pointer)
            value = store["value"] if store["ptr"] else store["vec"]
            loop = next((b for b in reversed(blocks) if b is not None), None)
            stored = reads(flow, "= " + (value or ""), None)
            if loop is None:
                flow.stored[pointer] = stored
            else:  # a later iteration of the same loop (its vector tail) still reads what was there before
                waiting.setdefault(loop, {})[pointer] = stored
            continue
        found = DEFINITION.match(text)
        if found is None:
            continue
        defined = found["name"] or found["update"]
        accumulator = defined.startswith("tmp_acc")
        read = reads(flow, text, defined)
        operands = [t for t in TMP.findall(text.split("=", 1)[1]) if t != defined]
        if accumulator:
            key = re.sub(r"_vec|_arr", "", defined)
            if found["name"]:  # a declaration: a new reduction starts on this accumulator
                if updated.pop(key, False):
                    pending.pop(key, None)  # the last one's declarations, whose updates went unrecognised
                flow.reduced |= set(flow.owner.get(key, []))
                flow.owner[key] = []
                pending.setdefault(key, []).append(index)
                continue
            updated[key] = True
            fits = candidates(flow, statement_ops(text), read, True) or candidates(
                flow, statement_ops(text), read.union(*(flow.deep.get(t, frozenset()) for t in operands)), True)
            if fits and not flow.owner.get(key):
                flow.owner[key] = [n.name for n in fits]
                for declared in pending.pop(key, []):
                    owners[declared] = list(flow.owner[key])
            if flow.owner.get(key):
                owners[index] = list(flow.owner[key])
                claim_inner(flow.owner[key], operands, defined_at, owners, flow, by_name)
            flow.values[defined] = frozenset(flow.owner.get(key, [])) or read
            continue
        ops = statement_ops(text)
        fits = candidates(flow, ops, read, False, operands) if ops else []
        defined_at[defined] = (index, operands)
        flow.deep[defined] = read.union(*(flow.deep.get(t, frozenset()) for t in operands))
        if fits:
            owners[index] = [n.name for n in fits]
            flow.values[defined] = frozenset(n.name for n in fits)
        else:
            flow.values[defined] = read
    for waiting_stores in waiting.values():
        flow.stored.update(waiting_stores)
    for param, buffer in flow.pointers.items():  # what the kernel wrote, for the kernels after it
        if param.startswith(("out_ptr", "in_out_ptr")) and flow.stored.get(param):
            buffers[buffer] = frozenset(n for n in flow.stored[param] if n in by_name) or flow.stored[param]
    return owners


def claim_inner(reduction: list[str], operands: list[str], defined_at: dict[str, tuple[int, list[str]]],
                owners: dict[int, list[str]], flow: Flow, by_name: dict[str, Node]) -> None:
    """The statements between a reduction's input and its accumulator are the reduction's own (a variance's
    `x - mean` and its square): an operand whose nodes are not what the reduction reads is its, back to them."""
    inputs = {a for name in reduction if name in by_name for a in by_name[name].args}
    stack = list(operands)
    while stack:
        variable = stack.pop()
        if variable not in defined_at:
            continue
        index, reads_from = defined_at[variable]
        held = flow.values.get(variable, frozenset())
        if held & inputs or not held & set(by_name):
            continue  # the reduction's input itself, or a load/constant
        owners[index] = list(reduction)
        flow.values[variable] = frozenset(reduction)
        stack += reads_from
