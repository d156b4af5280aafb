"""The diff of two lens runs (`kernel-lens diff --json`, docs/debug-directory.md) as a pure function over their
records: graphs, FX nodes and kernels are matched by source location and node target, never by name, and
fusion, added/removed kernels, generated code and times are compared. The compiler's CLI builds the `DiffGraph`s
from the files (and compares saved outputs with torch); the language server builds them from its index."""
from __future__ import annotations

import difflib
import os
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable

from lens_format.jsonio import SourceRef, source_ref_json
from lens_format.kernel_map import KernelMap
from lens_format.profile import GraphProfile

VERSION = 1
NodeKey = tuple  # (source file name, function, statement text, target, occurrence); align_edited_lines
# then gives a B node matching none by text the key of the A node on its line with its op and position
FUSED_DIFFERENTLY = ("split", "merged", "regrouped", "nodes_changed")
_SHAPE_CHANGE = {(1, 1): "nodes_changed", (1, 2): "split", (2, 1): "merged", (2, 2): "regrouped"}


@dataclass
class DiffNode:
    name: str
    target: str
    source: SourceRef | None
    key: NodeKey = ()

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "target": self.target, "source": source_ref_json(self.source)}


@dataclass
class DiffKernel:
    name: str
    kind: str
    nodes: list[str]
    keys: frozenset
    code: str  # the kernel's generated source, its name and FX line numbers normalised away
    time_ms: float | None


@dataclass
class DiffGraph:
    """One graph of a run as the diff sees it."""

    graph_id: str
    path: str
    nodes: dict[str, DiffNode]
    kernels: list[DiffKernel]
    compiled_ms: float | None

    def keys(self) -> set:
        return {n.key for n in self.nodes.values()}

    @classmethod
    def build(cls, graph_id: str, path: str, nodes: Iterable[tuple[str, str, SourceRef | None]],
              kernels: Iterable[tuple[str, str, list[str], int | None, int | None]], code_lines: list[str],
              kernel_ms: dict[str, float], compiled_ms: float | None) -> DiffGraph:
        """From (name, target, source) per node in graph order, (name, kind, nodes, first line, last line) per
        kernel in output_code.py (`code_lines`), the profile's ms per kernel and compiled ms."""
        seen: Counter = Counter()
        by_name: dict[str, DiffNode] = {}
        for name, target, src in nodes:
            # the statement's text rather than its line number, so an edit that shifts lines keeps the match
            where = (os.path.basename(src.file), src.function, src.code or src.line) if src else ("", "", "")
            base = (*where, target)
            seen[base] += 1
            by_name[name] = DiffNode(name, target, src, (*base, seen[base]))
        graph_kernels = [DiffKernel(name, kind, list(members), frozenset(by_name[x].key for x in members
                                                                          if x in by_name),
                                    kernel_code(code_lines, name, start, end), kernel_ms.get(name))
                         for name, kind, members, start, end in kernels]
        return cls(graph_id, path, by_name, graph_kernels, compiled_ms)


def kernel_code(lines: list[str], name: str, start: int | None, end: int | None) -> str:
    if start is None or end is None:
        return ""
    text = "".join(line.rstrip("\n") + "\n" for line in lines[start - 1:end]).replace(name, "KERNEL")
    return re.sub(r"(// Corresponding FX code line:) \d+", r"\1 N", text)


@dataclass
class OutputsDiff:
    status: str  # same | changed | inputs_differ | not_saved | not_compared
    max_abs_error: float | None = None
    max_rel_error: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "max_abs_error": self.max_abs_error, "max_rel_error": self.max_rel_error}


OutputsCompare = Callable[[DiffGraph, DiffGraph], OutputsDiff]


def outputs_not_saved(ga: DiffGraph, gb: DiffGraph) -> OutputsDiff:
    return OutputsDiff("not_saved")


@dataclass
class KernelChange:
    change: str  # same | code_changed | split | merged | regrouped | nodes_changed | added | removed
    a: list[DiffKernel]
    b: list[DiffKernel]
    nodes: list[dict[str, Any]] = field(default_factory=list)  # target, source, a, b, a_kernel, b_kernel
    code_diff: str | None = None

    def to_json(self) -> dict[str, Any]:
        ta = [k.time_ms for k in self.a]
        tb = [k.time_ms for k in self.b]
        timed = self.a and self.b and None not in ta and None not in tb
        return {"change": self.change, "a": [k.name for k in self.a], "b": [k.name for k in self.b],
                "nodes": self.nodes, "code_diff": self.code_diff,
                "time_ms": {"a": sum(ta), "b": sum(tb)} if timed else None}


def match_graphs(a: list[DiffGraph], b: list[DiffGraph]) -> list[tuple[DiffGraph | None, DiffGraph | None]]:
    """Pairs by node-key overlap (Jaccard), ties broken by compile order; unmatched graphs pair with None."""
    scored = []
    for i, ga in enumerate(a):
        for j, gb in enumerate(b):
            ka, kb = ga.keys(), gb.keys()
            score = len(ka & kb) / max(1, len(ka | kb))
            if score > 0 or (not ka and not kb):
                scored.append((-score, abs(i - j), i, j))
    pairs: dict[int, int] = {}
    used_b: set[int] = set()
    for _, _, i, j in sorted(scored):
        if i not in pairs and j not in used_b:
            pairs[i] = j
            used_b.add(j)
    out: list[tuple[DiffGraph | None, DiffGraph | None]] = [(ga, b[pairs[i]] if i in pairs else None)
                                                            for i, ga in enumerate(a)]
    out += [(None, gb) for j, gb in enumerate(b) if j not in used_b]
    return out


def _line_keys(g: DiffGraph) -> dict[tuple, DiffNode]:
    """Each node with a source by (file name, function, line, target, position among that line's nodes of
    that target)."""
    seen: Counter = Counter()
    out: dict[tuple, DiffNode] = {}
    for n in g.nodes.values():
        if n.source:
            base = (os.path.basename(n.source.file), n.source.function, n.source.line, n.target)
            seen[base] += 1
            out[(*base, seen[base])] = n
    return out


def align_edited_lines(ga: DiffGraph, gb: DiffGraph) -> DiffGraph:
    """B, where a node that no A node matches by statement text, but one does by source line, op and position
    among that line's nodes of that op, takes the A node's key. Editing one token of a line changes the
    statement text of every node the line produced; that alone makes none of them new."""
    ka, kb = ga.keys(), gb.keys()
    lines_a = {line: n for line, n in _line_keys(ga).items() if n.key not in kb}
    renamed: dict[str, NodeKey] = {}
    for line, nb in _line_keys(gb).items():
        na = lines_a.get(line)
        if nb.key not in ka and na is not None:
            renamed[nb.name] = na.key
    if not renamed:
        return gb
    nodes = {name: replace(n, key=renamed.get(name, n.key)) for name, n in gb.nodes.items()}
    kernels = [replace(k, keys=frozenset(nodes[x].key for x in k.nodes if x in nodes)) for k in gb.kernels]
    return replace(gb, nodes=nodes, kernels=kernels)


def _components(a: list[DiffKernel], b: list[DiffKernel]) -> list[tuple[list[int], list[int]]]:
    parent = {("a", i): ("a", i) for i in range(len(a))} | {("b", j): ("b", j) for j in range(len(b))}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    holders: dict = {}
    for j, kb in enumerate(b):
        for key in kb.keys:
            holders.setdefault(key, []).append(j)
    for i, ka in enumerate(a):
        for key in ka.keys:
            for j in holders.get(key, ()):
                parent[find(("a", i))] = find(("b", j))
    groups: dict = {}
    for x in parent:  # dict order: all A kernels in order, then B kernels
        groups.setdefault(find(x), []).append(x)
    return [([i for s, i in g if s == "a"], [j for s, j in g if s == "b"]) for g in groups.values()]


def _order(g: DiffGraph):
    rank = {n.key: i for i, n in enumerate(g.nodes.values())}
    return lambda key: rank.get(key, len(rank))


def diff_kernels(ga: DiffGraph, gb: DiffGraph) -> list[KernelChange]:
    by_key_a = {n.key: n for n in ga.nodes.values()}
    by_key_b = {n.key: n for n in gb.nodes.values()}
    changes = []
    for ia, ib in _components(ga.kernels, gb.kernels):
        ka, kb = [ga.kernels[i] for i in ia], [gb.kernels[j] for j in ib]
        if not kb:
            change = "removed"
        elif not ka:
            change = "added"
        elif len(ka) == 1 and len(kb) == 1 and ka[0].keys == kb[0].keys:
            change = "same" if ka[0].code == kb[0].code else "code_changed"
        else:
            change = _SHAPE_CHANGE[(min(len(ka), 2), min(len(kb), 2))]
        keys = [key for k in ka for key in sorted(k.keys, key=_order(ga))]
        keys += [key for k in kb for key in sorted(k.keys, key=_order(gb)) if key not in keys]
        nodes = []
        for key in dict.fromkeys(keys):
            na, nb = by_key_a.get(key), by_key_b.get(key)
            some = na or nb
            nodes.append({"target": some.target, "source": source_ref_json(some.source),
                          "a": na.name if na else None, "b": nb.name if nb else None,
                          "a_kernel": next((k.name for k in ka if key in k.keys), None),
                          "b_kernel": next((k.name for k in kb if key in k.keys), None)})
        code_diff = None
        if change == "code_changed":
            code_diff = "".join(difflib.unified_diff(ka[0].code.splitlines(True), kb[0].code.splitlines(True),
                                                     f"a/{ka[0].name}", f"b/{kb[0].name}", n=1))
        changes.append(KernelChange(change, ka, kb, nodes, code_diff))
    return changes


def diff_graph(ga: DiffGraph | None, gb: DiffGraph | None, outputs: OutputsCompare = outputs_not_saved
               ) -> dict[str, Any]:
    some = ga or gb
    assert some is not None
    entry: dict[str, Any] = {"a": ga.graph_id if ga else None, "b": gb.graph_id if gb else None,
                             "a_dir": ga.path if ga else None, "b_dir": gb.path if gb else None}
    if ga is None or gb is None:
        kernels = [KernelChange("removed" if ga else "added", some.kernels if ga else [],
                                [] if ga else some.kernels).to_json()]
        return entry | {"change": "removed" if ga else "added", "nodes_added": [], "nodes_removed": [],
                        "kernels": kernels if some.kernels else [], "time_ms": None,
                        "outputs": OutputsDiff("not_saved").to_json()}
    gb = align_edited_lines(ga, gb)
    ka, kb = ga.keys(), gb.keys()
    kernels = [c.to_json() for c in diff_kernels(ga, gb)]
    compared = outputs(ga, gb)
    changed = (ka != kb or any(k["change"] != "same" for k in kernels)
               or compared.status in ("changed", "inputs_differ"))
    timed = ga.compiled_ms is not None and gb.compiled_ms is not None
    return entry | {"change": "changed" if changed else "same",
                    "nodes_added": [n.to_json() for n in gb.nodes.values() if n.key not in ka],
                    "nodes_removed": [n.to_json() for n in ga.nodes.values() if n.key not in kb],
                    "kernels": kernels, "time_ms": {"a": ga.compiled_ms, "b": gb.compiled_ms} if timed else None,
                    "outputs": compared.to_json()}


def diff_runs(path_a: str, graphs_a: list[DiffGraph], path_b: str, graphs_b: list[DiffGraph],
              outputs: OutputsCompare = outputs_not_saved) -> dict[str, Any]:
    """The `diff --json` document of two runs' graphs (each list in compile order)."""
    graphs = [diff_graph(ga, gb, outputs) for ga, gb in match_graphs(graphs_a, graphs_b)]
    kernels = [k for g in graphs for k in g["kernels"]]
    count = Counter(k["change"] for k in kernels)
    summary = {"graphs_matched": sum(1 for g in graphs if g["a"] and g["b"]),
               "graphs_added": sum(1 for g in graphs if not g["a"]),
               "graphs_removed": sum(1 for g in graphs if not g["b"]),
               "kernels_same": count["same"], "code_changed": count["code_changed"],
               "fused_differently": sum(count[c] for c in FUSED_DIFFERENTLY),
               # kernels, not changes: a graph only one run has is one change of all its kernels
               "kernels_added": sum(len(k["b"]) for k in kernels if k["change"] == "added"),
               "kernels_removed": sum(len(k["a"]) for k in kernels if k["change"] == "removed"),
               "outputs_changed": sum(1 for g in graphs if g["outputs"]["status"] == "changed")}
    return {"version": VERSION, "a": path_a, "b": path_b,
            "changed": any(g["change"] != "same" for g in graphs), "summary": summary, "graphs": graphs}


def graph_from_records(path: str, kmap: KernelMap, code_lines: list[str], profile: GraphProfile | None
                       ) -> DiffGraph:
    """A graph folder's DiffGraph from its kernel_map.json, output_code.py lines and profile.json."""
    return DiffGraph.build(kmap.graph_id or os.path.basename(path), path,
                           ((n.name, n.target, n.source) for n in kmap.nodes),
                           ((k.name, k.kind, k.nodes, k.start_line, k.end_line) for k in kmap.kernels), code_lines,
                           profile.kernel_ms() if profile else {}, profile.compiled_ms if profile else None)
