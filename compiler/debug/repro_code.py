"""Standalone Python for an FX graph: `fx_graph_runnable.py` and the minifier's `repro.py`."""
from __future__ import annotations

import shlex
import textwrap

import torch
import torch.fx

from compiler.codegen.wrapper import py_repr
from lens_format import files


def input_specs(example_inputs) -> list[tuple[tuple[int, ...], tuple[int, ...], torch.dtype]]:
    return [(tuple(t.shape), tuple(t.stride()), t.dtype) for t in example_inputs if isinstance(t, torch.Tensor)]


def runnable_graph_code(gm: torch.fx.GraphModule, specs, title: str, tensors_file: str | None = None,
                        run_path: str = "fx_graph_runnable.py") -> str:
    """A script defining `class Repro(torch.nn.Module)` and `load_args()`, which runs the graph eagerly
    and with the lens backend and compares them. The inputs saved at `tensors_file` (relative to the
    script; default the graph's `tensors/inputs.pt`) are used when that file exists, else random ones.
    `run_path` is the file the script is written to, as its header tells the reader to run it."""
    body = textwrap.indent(gm.code.strip("\n"), "    ")
    args = ", ".join(f"rand_strided({py_repr(s)}, {py_repr(st)}, {d})" for s, st, d in specs)
    saved = repr(tensors_file or files.TENSORS_INPUTS)
    from compiler import config
    overrides = (f"\nimport compiler.config\ncompiler.config.cpp.op_overrides = {dict(config.cpp.op_overrides)!r}"
                 "  # the codegen setting this graph was compiled with\n") if config.cpp.op_overrides else ""
    return f'''# {title}
# Runs standalone: `python {shlex.quote(run_path)}` (eager vs lens, compared).
import os
import torch
from torch import tensor, device
from math import inf, nan
from compiler.machine.runtime import rand_strided
{overrides}
_SAVED_INPUTS = {saved}  # real inputs, loaded when present (kernel-lens compile --save-tensors)


class Repro(torch.nn.Module):
    def __init__(self):
        super().__init__()

{body}


def load_args():
    if _SAVED_INPUTS and os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), _SAVED_INPUTS)):
        return torch.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), _SAVED_INPUTS))
    torch.manual_seed(0)
    return [{args}]


if __name__ == "__main__":
    from compiler.pipeline import compile_graph_module
    mod = Repro()
    expected = mod(*load_args())
    compiled = compile_graph_module(torch.fx.symbolic_trace(mod), load_args())
    got = compiled(load_args())
    for i, (e, g) in enumerate(zip(expected, got)):
        if isinstance(e, torch.Tensor):
            torch.testing.assert_close(g, e, equal_nan=True)
    print("OK: lens matches eager on", len(expected), "outputs")
'''
