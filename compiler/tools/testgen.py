"""`kernel-lens gen-tests DEBUG_DIR -o DIR`: one pytest file per kernel of a lens run: the kernel's FX
subgraph as a module, its saved inputs (or random ones of the same shape/dtype/stride), and a test
that compiling it with lens gives what eager gives, under the op_overrides the run was compiled with."""
from __future__ import annotations

import glob
import os
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import torch

from compiler.debug.repro_code import ReproInputs
from compiler.tools.accuracy import DEFAULT_TOL
from compiler.tools.kernel_subgraph import (
    KernelBoundary,
    kernel_boundary,
    kernel_subgraph,
    load_named_repro,
    recorded_op_overrides,
)
from compiler.tools.saved_tensors import boundary_values, load_kernel_tensors
from lens_format import files
from lens_format.jsonio import SourceRef
from lens_format.kernel_map import MappedKernel, read_kernel_map


@dataclass
class GeneratedTest:
    path: str
    graph_dir: str
    kernel: str
    inputs: str  # "saved" | "random"


@dataclass
class SkippedKernel:
    graph_dir: str
    kernel: str
    reason: str


def graph_dirs(path: str) -> list[str]:
    """Lens graph folders at or under `path` (a graph folder, a run folder, or a torch_compile_debug root)."""
    def is_graph(p: str) -> bool:
        return os.path.exists(os.path.join(p, files.KERNEL_MAP)) and os.path.exists(
            os.path.join(p, files.FX_GRAPH_RUNNABLE))

    if is_graph(path):
        return [path]
    found = [p for pattern in ("lens/graph_*", "run_*/lens/graph_*") for p in glob.glob(os.path.join(path, pattern))]
    return sorted((p for p in found if is_graph(p)), key=_graph_order)


def _graph_order(path: str) -> tuple[str, int]:
    run, graph = os.path.split(path.rstrip(os.sep))
    number = re.search(r"(\d+)$", graph)
    return run, int(number.group(1)) if number else 0


def generate_tests(debug_dir: str, out_dir: str, tol: float = DEFAULT_TOL
                   ) -> tuple[list[GeneratedTest], list[SkippedKernel]]:
    """Write the test files for every kernel of every lens graph under `debug_dir`."""
    os.makedirs(out_dir, exist_ok=True)
    written: list[GeneratedTest] = []
    skipped: list[SkippedKernel] = []
    used: set[str] = set()
    for graph_dir in graph_dirs(debug_dir):
        kmap = read_kernel_map(Path(graph_dir) / files.KERNEL_MAP)
        gm, graph_inputs, symbols = load_named_repro(graph_dir)
        overrides = recorded_op_overrides(graph_dir)
        boundaries = [(k, kernel_boundary(gm, k.name, k.nodes)) for k in kmap.kernels]
        values = boundary_values(gm, graph_inputs, [b for _, b in boundaries])
        sources = {n.name: n.source for n in kmap.nodes}
        for kernel, b in boundaries:
            if not b.nodes:
                skipped.append(SkippedKernel(graph_dir, b.kernel, "none of its nodes is in fx_graph_runnable.py"))
                continue
            if not all(isinstance(values.get(n), (torch.Tensor, int)) for n in b.inputs):
                skipped.append(SkippedKernel(graph_dir, b.kernel, "an input is neither a tensor nor a size"))
                continue
            stem = _unique_stem(used, f"test_{kmap.graph_id}_{b.kernel}")
            saved = load_kernel_tensors(graph_dir, b.kernel)
            inputs_file = None
            if saved is not None and saved.input_names == b.inputs:
                inputs_file = f"{stem}_inputs.pt"
                torch.save(saved.inputs, os.path.join(out_dir, inputs_file))
            sub = kernel_subgraph(gm, b)
            inputs = symbols.repro_inputs(sub, [values[n] for n in b.inputs])
            code = kernel_test_code(kernel, b, sub.code, inputs, inputs_file, overrides, graph_dir, sources, tol)
            path = os.path.join(out_dir, f"{stem}.py")
            with open(path, "w") as f:
                f.write(code)
            written.append(GeneratedTest(path, graph_dir, b.kernel, "saved" if inputs_file else "random"))
    return written, skipped


def _unique_stem(used: set[str], stem: str) -> str:
    """`stem`, numbered when this run already wrote it (graph ids repeat across runs; a rerun overwrites)."""
    candidate, n = stem, 1
    while candidate in used:
        n += 1
        candidate = f"{stem}_{n}"
    used.add(candidate)
    return candidate


def _source_lines(b: KernelBoundary, sources: dict[str, SourceRef | None]) -> list[str]:
    seen: list[str] = []
    for name in b.nodes:
        src = sources.get(name)
        if src:
            line = f"{src.file}:{src.line} in {src.function}: {src.code}"
            if line not in seen:
                seen.append(line)
    return seen


def kernel_test_code(kernel: MappedKernel, b: KernelBoundary, forward_code: str, inputs: ReproInputs,
                     inputs_file: str | None, overrides: dict[str, str], graph_dir: str,
                     sources: dict[str, SourceRef | None], tol: float) -> str:
    """The text of one generated pytest file (a kernel of a graph over size symbols is compiled over them)."""
    forward = textwrap.indent(forward_code.strip("\n"), "    ")
    random_args = ", ".join(s.random_text() for s in inputs.specs)
    bound = "".join(f"    {name} = SIZES[{name!r}]\n" for name in inputs.sizes)
    symbolic = ", ".join(s.symbolic_text() for s in inputs.specs)
    where = "\n".join(f"#   {line}" for line in _source_lines(b, sources)) or "#   (no source location recorded)"
    saved = repr(inputs_file) if inputs_file else "None"
    test_name = re.sub(r"\W", "_", b.kernel)
    return f'''# Generated by `kernel-lens gen-tests` from {os.path.abspath(graph_dir)}
# Kernel {b.kernel} ({kernel.kind or "?"}): FX nodes {", ".join(b.nodes)}
# inputs {", ".join(b.inputs)} -> outputs {", ".join(b.outputs)}; from source:
{where}
import os

import torch
from torch import tensor, device
from math import inf, nan

import compiler.config
from compiler.tools.accuracy import compare
from compiler.machine.runtime import rand_strided
from compiler.tools.repro_compile import compile_repro

KERNEL = {b.kernel!r}
OP_OVERRIDES = {overrides!r}  # compiler.config.cpp.op_overrides of the run (recorded in fx_graph_runnable.py)
TOL = {tol!r}  # atol = rtol for floating outputs; integers and bools must be equal
_SAVED_INPUTS = {saved}  # the kernel's real inputs, saved by kernel-lens compile --save-tensors
SIZES = {inputs.sizes!r}  # the graph's size symbols, bound to the sizes of the call that compiled it
SYMBOLIC_INPUTS = [{symbolic}]  # each input over the symbols: lens compiles the kernel for every size


class KernelGraph(torch.nn.Module):
{forward}


def kernel_inputs():
    if _SAVED_INPUTS:
        return torch.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), _SAVED_INPUTS))
{bound}    torch.manual_seed(0)
    return [{random_args}]


def test_{test_name}_matches_eager():
    old = dict(compiler.config.cpp.op_overrides)
    compiler.config.cpp.op_overrides = dict(OP_OVERRIDES)
    try:
        gm = torch.fx.symbolic_trace(KernelGraph())
        expected = gm(*kernel_inputs())
        got = compile_repro(gm, kernel_inputs(), SYMBOLIC_INPUTS, SIZES)(kernel_inputs())
    finally:
        compiler.config.cpp.op_overrides = old
    diff = compare(list(expected), list(got), TOL)
    assert diff is None, (f"{{KERNEL}}: lens differs from eager: max abs error {{diff.max_abs_error:.6g}}, "
                          f"max rel error {{diff.max_rel_error:.6g}} (tol {{TOL}})")
'''
