"""Standalone Python for an FX graph: `fx_graph_runnable.py` and the minifier's `repro.py`. A graph over Dynamo's
size symbols gets them bound to the sizes of the call that compiled it, its size arguments passed, and is
compiled again over the same symbols (compiler/tools/repro_compile.py)."""
from __future__ import annotations

import shlex
import textwrap
from dataclasses import dataclass, field

import torch
import torch.fx

from compiler.codegen.wrapper import py_repr
from compiler.ir.size_symbols import py_expr
from lens_format import files


@dataclass(frozen=True)
class InputSpec:
    """One graph input as a script rebuilds it: a tensor (`sizes`/`strides` as Python text over the size symbols),
    a size argument (`size`: its symbol's text, `s77`) or any other value (`value`, as Python text)."""

    kind: str  # tensor | size | value
    sizes: str = ""
    strides: str = ""
    dtype: torch.dtype | None = None
    size: str = ""
    value: str = "None"

    @property
    def symbolic(self) -> bool:
        return self.kind == "size" or (self.kind == "tensor" and _has_symbol(self.sizes + self.strides))

    def random_text(self) -> str:
        """The expression load_args() builds it with."""
        if self.kind == "tensor":
            return f"rand_strided({self.sizes}, {self.strides}, {self.dtype})"
        return self.size if self.kind == "size" else self.value

    def symbolic_text(self) -> str:
        """Its entry in the script's SYMBOLIC_INPUTS (None: compiled for its own sizes)."""
        if self.kind == "size":
            return repr(self.size)
        if self.kind == "tensor" and self.symbolic:
            return repr((self.sizes, self.strides))
        return "None"


@dataclass
class ReproInputs:
    """A graph's inputs as a script rebuilds them, and its size symbols bound to the sizes of the call that
    compiled it (symbol -> size; None where the size is data-dependent and was not known)."""

    specs: list[InputSpec]
    sizes: dict[str, int | None] = field(default_factory=dict)

    @property
    def symbolic(self) -> bool:
        return any(s.symbolic for s in self.specs)


def _has_symbol(text: str) -> bool:
    return any(c.isalpha() for c in text)


def _text(v) -> str:
    if isinstance(v, torch.SymInt):
        return py_expr(v.node.expr)
    return py_repr(v)


def _shape_text(values) -> str:
    items = [_text(v) for v in values]
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def _bind(v, sizes: dict[str, int | None]) -> None:
    """Adds the symbols of a SymInt to `sizes`, each with its value in the call that compiled the graph."""
    if not isinstance(v, torch.SymInt):
        return
    env = v.node.shape_env
    known = {}
    if env is not None:  # (torch 2.13 names the backed values `backed_var_to_val`; older, `var_to_val`)
        known = {**getattr(env, "unbacked_var_to_val", {}),
                 **(getattr(env, "backed_var_to_val", None) or env.var_to_val)}
    for sym in v.node.expr.free_symbols:
        value = known.get(sym)
        sizes.setdefault(str(sym), int(value) if value is not None else None)


def input_spec(v, sizes: dict[str, int | None]) -> InputSpec:
    if isinstance(v, torch.Tensor):
        for d in (*v.shape, *v.stride()):
            _bind(d, sizes)
        return InputSpec("tensor", _shape_text(v.shape), _shape_text(v.stride()), v.dtype)
    if isinstance(v, torch.SymInt):
        _bind(v, sizes)
        return InputSpec("size", size=_text(v))
    return InputSpec("value", value=py_repr(v))


def input_specs(example_inputs) -> ReproInputs:
    """Every input of a graph (tensors, size arguments, other values) as a script rebuilds it."""
    sizes: dict[str, int | None] = {}
    specs = []
    for v in example_inputs:
        try:
            specs.append(input_spec(v, sizes))
        except Exception:  # noqa: BLE001 (debug output never breaks compilation: the script gets None there)
            specs.append(InputSpec("value"))
    return ReproInputs(specs, dict(sorted(sizes.items())))


def runnable_graph_code(gm: torch.fx.GraphModule, inputs: ReproInputs, title: str, tensors_file: str | None = None,
                        run_path: str = "fx_graph_runnable.py") -> str:
    """A script defining `class Repro(torch.nn.Module)` and `load_args()`, which runs the graph eagerly
    and with the lens backend and compares them. The inputs saved at `tensors_file` (relative to the
    script; default the graph's `tensors/inputs.pt`) are used when that file exists, else random ones.
    `run_path` is the file the script is written to, as its header tells the reader to run it."""
    body = textwrap.indent(gm.code.strip("\n"), "    ")
    args = ", ".join(s.random_text() for s in inputs.specs)
    saved = repr(tensors_file or files.TENSORS_INPUTS)
    from compiler import config
    overrides = (f"\nimport compiler.config\ncompiler.config.cpp.op_overrides = {dict(config.cpp.op_overrides)!r}"
                 "  # the codegen setting this graph was compiled with\n") if config.cpp.op_overrides else ""
    bound = "".join(f"    {name} = SIZES[{name!r}]\n" for name in inputs.sizes)
    symbolic = ", ".join(s.symbolic_text() for s in inputs.specs)
    return f'''# {title}
# Runs standalone: `python {shlex.quote(run_path)}` (eager vs lens, compared).
import os
import torch
from torch import tensor, device
from math import inf, nan
from compiler.machine.runtime import rand_strided
{overrides}
_SAVED_INPUTS = {saved}  # real inputs, loaded when present (kernel-lens compile --save-tensors)
# the graph's size symbols, bound to the sizes of the call that compiled it (change them to try other sizes)
SIZES = {inputs.sizes!r}
# each input over the symbols (a tensor's sizes and strides, a size argument): lens compiles it for every size
SYMBOLIC_INPUTS = [{symbolic}]


class Repro(torch.nn.Module):
    def __init__(self):
        super().__init__()

{body}


def load_args():
    if _SAVED_INPUTS and os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), _SAVED_INPUTS)):
        return torch.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), _SAVED_INPUTS))
{bound}    torch.manual_seed(0)
    return [{args}]


if __name__ == "__main__":
    from compiler.tools.repro_compile import compile_repro
    mod = Repro()
    expected = mod(*load_args())
    compiled = compile_repro(torch.fx.symbolic_trace(mod), load_args(), SYMBOLIC_INPUTS, SIZES)
    got = compiled(load_args())
    for i, (e, g) in enumerate(zip(expected, got)):
        if isinstance(e, torch.Tensor):
            torch.testing.assert_close(g, e, equal_nan=True)
    print("OK: lens matches eager on", len(expected), "outputs")
'''
