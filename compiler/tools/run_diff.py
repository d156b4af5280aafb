"""`kernel-lens diff RUN_A RUN_B`: match the graphs, FX nodes and kernels of two lens runs by source
location and node target (not by name) and report what changed: fusion, added/removed kernels,
generated code, per-kernel times (profile.json) and outputs (tensors/). JSON shape: docs/debug-directory.md."""
from __future__ import annotations

import difflib
import json
import math
import os
import re
from collections import Counter
from dataclasses import dataclass, field, replace

from compiler.tools.accuracy import compare
from compiler.tools.saved_tensors import load_graph_tensors
from compiler.tools.testgen import graph_dirs

DIFF_VERSION = 1
NodeKey = tuple  # (source file name, function, statement text, target, occurrence); align_edited_lines
# then gives a B node matching none by text the key of the A node on its line with its op and position


class RunNotFound(Exception):
    """A path given to diff holds no lens graph folders."""


@dataclass
class NodeInfo:
    name: str
    target: str
    source: dict | None
    key: NodeKey = ()

    def to_json(self) -> dict:
        return {"name": self.name, "target": self.target, "source": self.source}


@dataclass
class KernelInfo:
    name: str
    kind: str
    nodes: list[str]
    keys: frozenset
    code: str  # the kernel's generated source, its name and FX line numbers normalised away
    time_ms: float | None


@dataclass
class GraphInfo:
    graph_id: str
    path: str
    nodes: dict[str, NodeInfo]
    kernels: list[KernelInfo]
    compiled_ms: float | None

    def keys(self) -> set:
        return {n.key for n in self.nodes.values()}


def resolve_run(path: str) -> tuple[str, list[str]]:
    """(the folder compared, its graph folders): a graph folder, a run folder, or a torch_compile_debug
    root (then its newest run)."""
    if not os.path.isdir(path):
        raise RunNotFound(f"no such directory: {path}")
    runs = sorted(p for p in os.listdir(path) if p.startswith("run_"))
    if runs and not os.path.isdir(os.path.join(path, "lens")):
        path = os.path.join(path, runs[-1])
    found = graph_dirs(path)
    if not found:
        raise RunNotFound(f"{path}: no lens graph folders (run_*/lens/graph_N with kernel_map.json)")
    return os.path.abspath(path), found


def _read_json(path: str) -> dict | None:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _kernel_code(lines: list[str], kernel: dict) -> str:
    start, end = kernel["output_code_lines"]
    text = "".join(lines[start - 1:end])
    text = text.replace(kernel["name"], "KERNEL")
    return re.sub(r"(// Corresponding FX code line:) \d+", r"\1 N", text)


def load_graph(graph_dir: str) -> GraphInfo:
    kmap = _read_json(os.path.join(graph_dir, "kernel_map.json")) or {}
    seen: Counter = Counter()
    nodes: dict[str, NodeInfo] = {}
    for n in kmap.get("nodes", []):
        src = n.get("source")
        # the statement's text rather than its line number, so an edit that shifts lines keeps the match
        where = (os.path.basename(src["file"]), src["function"], src.get("code") or src["line"]) if src else ("", "", "")
        base = (*where, n["target"])
        seen[base] += 1
        nodes[n["name"]] = NodeInfo(n["name"], n["target"], src, (*base, seen[base]))
    try:
        with open(os.path.join(graph_dir, "output_code.py")) as f:
            code_lines = f.readlines()
    except OSError:
        code_lines = []
    profile = _read_json(os.path.join(graph_dir, "profile.json")) or {}
    times = {k["name"]: k["total_ms"] for k in profile.get("kernels", [])}
    kernels = [KernelInfo(k["name"], k["kind"], list(k["nodes"]),
                          frozenset(nodes[x].key for x in k["nodes"] if x in nodes),
                          _kernel_code(code_lines, k), times.get(k["name"]))
               for k in kmap.get("kernels", [])]
    return GraphInfo(kmap.get("graph_id", os.path.basename(graph_dir)), graph_dir, nodes, kernels,
                     profile.get("compiled_ms"))


def match_graphs(a: list[GraphInfo], b: list[GraphInfo]) -> list[tuple[GraphInfo | None, GraphInfo | None]]:
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
    out: list[tuple[GraphInfo | None, GraphInfo | None]] = [(ga, b[pairs[i]] if i in pairs else None)
                                                            for i, ga in enumerate(a)]
    out += [(None, gb) for j, gb in enumerate(b) if j not in used_b]
    return out


def _line_keys(g: GraphInfo) -> dict[tuple, NodeInfo]:
    """Each node with a source by (file name, function, line, target, position among that line's nodes of
    that target)."""
    seen: Counter = Counter()
    out: dict[tuple, NodeInfo] = {}
    for n in g.nodes.values():
        if n.source:
            base = (os.path.basename(n.source["file"]), n.source["function"], n.source["line"], n.target)
            seen[base] += 1
            out[(*base, seen[base])] = n
    return out


def align_edited_lines(ga: GraphInfo, gb: GraphInfo) -> GraphInfo:
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


@dataclass
class KernelChange:
    change: str  # same | code_changed | split | merged | regrouped | nodes_changed | added | removed
    a: list[KernelInfo]
    b: list[KernelInfo]
    nodes: list[dict] = field(default_factory=list)
    code_diff: str | None = None

    def to_json(self) -> dict:
        ta = [k.time_ms for k in self.a]
        tb = [k.time_ms for k in self.b]
        timed = self.a and self.b and None not in ta and None not in tb
        return {"change": self.change, "a": [k.name for k in self.a], "b": [k.name for k in self.b],
                "nodes": self.nodes, "code_diff": self.code_diff,
                "time_ms": {"a": sum(ta), "b": sum(tb)} if timed else None}


def _components(a: list[KernelInfo], b: list[KernelInfo]) -> list[tuple[list[int], list[int]]]:
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


_SHAPE_CHANGE = {(1, 1): "nodes_changed", (1, 2): "split", (2, 1): "merged", (2, 2): "regrouped"}


def diff_kernels(ga: GraphInfo, gb: GraphInfo) -> list[KernelChange]:
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
            nodes.append({"target": some.target, "source": some.source,
                          "a": na.name if na else None, "b": nb.name if nb else None,
                          "a_kernel": next((k.name for k in ka if key in k.keys), None),
                          "b_kernel": next((k.name for k in kb if key in k.keys), None)})
        code_diff = None
        if change == "code_changed":
            code_diff = "".join(difflib.unified_diff(ka[0].code.splitlines(True), kb[0].code.splitlines(True),
                                                     f"a/{ka[0].name}", f"b/{kb[0].name}", n=1))
        changes.append(KernelChange(change, ka, kb, nodes, code_diff))
    return changes


def _order(g: GraphInfo):
    rank = {n.key: i for i, n in enumerate(g.nodes.values())}
    return lambda key: rank.get(key, len(rank))


def diff_outputs(ga: GraphInfo, gb: GraphInfo) -> dict:
    """Saved graph outputs compared bit for bit (tensors/outputs.pt), and whether the inputs were equal."""
    ia, oa = load_graph_tensors(ga.path)
    ib, ob = load_graph_tensors(gb.path)
    if oa is None or ob is None:
        return {"status": "not_saved", "max_abs_error": None, "max_rel_error": None}
    d = compare(list(oa), list(ob), 0.0)
    status = "same" if d is None else "changed"
    if ia is not None and ib is not None and compare(list(ia), list(ib), 0.0) is not None:
        status = "inputs_differ"
    return {"status": status, "max_abs_error": _finite(d.max_abs_error) if d else 0.0,
            "max_rel_error": _finite(d.max_rel_error) if d else 0.0}


def _finite(x: float) -> float | None:
    """JSON has no NaN/inf: a shape, dtype or NaN-pattern mismatch is reported as null."""
    return x if math.isfinite(x) else None


def diff_graph(ga: GraphInfo | None, gb: GraphInfo | None) -> dict:
    some = ga or gb
    assert some is not None
    entry: dict = {"a": ga.graph_id if ga else None, "b": gb.graph_id if gb else None,
                   "a_dir": ga.path if ga else None, "b_dir": gb.path if gb else None}
    if ga is None or gb is None:
        kernels = [KernelChange("removed" if ga else "added", some.kernels if ga else [],
                                [] if ga else some.kernels).to_json()]
        return entry | {"change": "removed" if ga else "added", "nodes_added": [], "nodes_removed": [],
                        "kernels": kernels if some.kernels else [], "time_ms": None,
                        "outputs": {"status": "not_saved", "max_abs_error": None, "max_rel_error": None}}
    gb = align_edited_lines(ga, gb)
    ka, kb = ga.keys(), gb.keys()
    kernels = [c.to_json() for c in diff_kernels(ga, gb)]
    outputs = diff_outputs(ga, gb)
    changed = (ka != kb or any(k["change"] != "same" for k in kernels)
               or outputs["status"] in ("changed", "inputs_differ"))
    timed = ga.compiled_ms is not None and gb.compiled_ms is not None
    return entry | {"change": "changed" if changed else "same",
                    "nodes_added": [n.to_json() for n in gb.nodes.values() if n.key not in ka],
                    "nodes_removed": [n.to_json() for n in ga.nodes.values() if n.key not in kb],
                    "kernels": kernels, "time_ms": {"a": ga.compiled_ms, "b": gb.compiled_ms} if timed else None,
                    "outputs": outputs}


def diff_runs(run_a: str, run_b: str) -> dict:
    """The `diff --json` document for two runs (raises RunNotFound)."""
    (path_a, dirs_a), (path_b, dirs_b) = resolve_run(run_a), resolve_run(run_b)
    graphs = [diff_graph(ga, gb) for ga, gb in match_graphs([load_graph(d) for d in dirs_a],
                                                            [load_graph(d) for d in dirs_b])]
    kernels = [k for g in graphs for k in g["kernels"]]
    count = Counter(k["change"] for k in kernels)
    summary = {"graphs_matched": sum(1 for g in graphs if g["a"] and g["b"]),
               "graphs_added": sum(1 for g in graphs if not g["a"]),
               "graphs_removed": sum(1 for g in graphs if not g["b"]),
               "kernels_same": count["same"], "code_changed": count["code_changed"],
               "fused_differently": sum(count[c] for c in ("split", "merged", "regrouped", "nodes_changed")),
               "kernels_added": count["added"], "kernels_removed": count["removed"],
               "outputs_changed": sum(1 for g in graphs if g["outputs"]["status"] == "changed")}
    return {"version": DIFF_VERSION, "a": path_a, "b": path_b,
            "changed": any(g["change"] != "same" for g in graphs), "summary": summary, "graphs": graphs}


def _node_text(n: dict) -> str:
    src = n.get("source")
    where = f" {os.path.basename(src['file'])}:{src['line']}" if src else ""
    return f"{n.get('a') or n.get('b') or n.get('name')} ({n['target']}{where})"


def format_diff(doc: dict, show_code: bool = True) -> str:
    """The human-readable report of a `diff_runs` document."""
    out = [f"A: {doc['a']}", f"B: {doc['b']}"]
    for g in doc["graphs"]:
        out.append(f"\n{g['a'] or '-'} <-> {g['b'] or '-'}: {g['change']}")
        for k in g["kernels"]:
            names = f"{', '.join(k['a']) or '-'} -> {', '.join(k['b']) or '-'}"
            time = f"  [{k['time_ms']['a']:.4f} ms -> {k['time_ms']['b']:.4f} ms]" if k["time_ms"] else ""
            out.append(f"  {k['change']:<14} {names}{time}")
            if k["change"] not in ("same", "code_changed"):
                for n in k["nodes"]:
                    out.append(f"      {_node_text(n)}: {n['a_kernel'] or '-'} -> {n['b_kernel'] or '-'}")
            if k["code_diff"] and show_code:
                out += ["      " + line for line in k["code_diff"].splitlines()]
        for label, key in (("node added", "nodes_added"), ("node removed", "nodes_removed")):
            out += [f"  {label}: {_node_text(n)}" for n in g[key]]
        if g["time_ms"]:
            out.append(f"  compiled time: {g['time_ms']['a']:.4f} ms -> {g['time_ms']['b']:.4f} ms")
        o = g["outputs"]
        if o["status"] == "same":
            out.append("  outputs: same (bit for bit)")
        elif o["status"] != "not_saved":
            out.append(f"  outputs: {o['status'].replace('_', ' ')}: max abs error {o['max_abs_error']}, "
                       f"max rel error {o['max_rel_error']}")
    s = doc["summary"]
    out.append("\nsummary: " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in s.items() if v))
    return "\n".join(out)
