"""`kernel-lens diff RUN_A RUN_B`: match the graphs, FX nodes and kernels of two lens runs by source
location and node target (not by name) and report what changed: fusion, added/removed kernels,
generated code, per-kernel times (profile.json) and outputs (tensors/). JSON shape: docs/debug-directory.md."""
from __future__ import annotations

import math
import os
from pathlib import Path

from lens_format import files
from lens_format.errors import ParseError
from lens_format.kernel_map import KernelMap, read_kernel_map
from lens_format.profile import read_profile
from lens_format.run_diff import DiffGraph, OutputsDiff, graph_from_records
from lens_format.run_diff import diff_runs as diff_graphs

from compiler.tools.accuracy import compare
from compiler.tools.saved_tensors import load_graph_tensors
from compiler.tools.testgen import graph_dirs


class RunNotFound(Exception):
    """A path given to diff holds no lens graph folders."""


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


def load_graph(graph_dir: str) -> DiffGraph:
    """A graph folder's kernel_map.json, output_code.py and profile.json (a missing or unreadable profile: no
    times) as the format's DiffGraph."""
    try:
        kmap = read_kernel_map(Path(graph_dir) / files.KERNEL_MAP)
    except ParseError:  # cut short while written, or another version: a graph of no nodes
        kmap = KernelMap("")
    try:
        with open(os.path.join(graph_dir, files.OUTPUT_CODE)) as f:
            code_lines = f.readlines()
    except OSError:
        code_lines = []
    try:
        profile = read_profile(Path(graph_dir) / files.PROFILE)
    except ParseError:
        profile = None
    return graph_from_records(graph_dir, kmap, code_lines, profile)


def diff_outputs(ga: DiffGraph, gb: DiffGraph) -> OutputsDiff:
    """Saved graph outputs compared bit for bit (tensors/outputs.pt), and whether the inputs were equal."""
    ia, oa = load_graph_tensors(ga.path)
    ib, ob = load_graph_tensors(gb.path)
    if oa is None or ob is None:
        return OutputsDiff("not_saved")
    d = compare(list(oa), list(ob), 0.0)
    status = "same" if d is None else "changed"
    if ia is not None and ib is not None and compare(list(ia), list(ib), 0.0) is not None:
        status = "inputs_differ"
    return OutputsDiff(status, _finite(d.max_abs_error) if d else 0.0, _finite(d.max_rel_error) if d else 0.0)


def _finite(x: float) -> float | None:
    """JSON has no NaN/inf: a shape, dtype or NaN-pattern mismatch is reported as null."""
    return x if math.isfinite(x) else None


def diff_runs(run_a: str, run_b: str) -> dict:
    """The `diff --json` document for two runs (raises RunNotFound)."""
    (path_a, dirs_a), (path_b, dirs_b) = resolve_run(run_a), resolve_run(run_b)
    return diff_graphs(path_a, [load_graph(d) for d in dirs_a], path_b, [load_graph(d) for d in dirs_b],
                       diff_outputs)


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
    out.append("\nsummary: " + ", ".join(_count(v, k) for k, v in s.items() if v))
    return "\n".join(out)


def _count(n: int, key: str) -> str:
    """`3 kernels added`, `1 kernel added` (a summary key of the diff document in words)."""
    words = key.replace("_", " ")
    return f"{n} {words.replace('graphs ', 'graph ').replace('kernels ', 'kernel ') if n == 1 else words}"
