"""Compile a graph written out by the debug directory (fx_graph_runnable.py, repro.py, gen-tests' files) as it was
compiled: a graph over Dynamo's size symbols again over symbols (fake inputs of symbolic sizes in a fresh
ShapeEnv, size arguments as SymInts), so its generated code is the dynamic one, not one specialized to the
sizes of this call (which would also send a graph taking a size argument to run eagerly)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import sympy
import torch
import torch.fx

from compiler.debug.repro_code import InputSpec, ReproInputs, input_spec
from compiler.ir.size_symbols import py_expr

# one input over the symbols, as SYMBOLIC_INPUTS writes it: None (compiled for its own sizes), a size argument's
# text ("s77") or a tensor's (sizes, strides) texts ("(s77, 8)", "(8, 1)")
Symbolic = object


def _static(symbolic: Sequence | None) -> bool:
    return not symbolic or all(s is None for s in symbolic)


@dataclass
class _Symbols:
    values: dict[str, torch.SymInt]  # the script's name -> a SymInt over a fresh symbol
    names: dict[sympy.Symbol, sympy.Symbol]  # the fresh symbol -> the script's name

    def text(self, v) -> str:
        return py_expr(v.node.expr.xreplace(self.names)) if isinstance(v, torch.SymInt) else repr(int(v))

    def shape_text(self, values) -> str:
        items = [self.text(v) for v in values]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def _symbols(sizes: dict[str, int | None], args: Sequence, symbolic: Sequence) -> _Symbols:
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv
    env = ShapeEnv()
    values = dict(sizes)
    for arg, spec in zip(args, symbolic):  # a size argument's own value, where SIZES does not know it
        if isinstance(spec, str) and spec.isidentifier() and values.get(spec) is None and isinstance(arg, int):
            values[spec] = arg
    out = _Symbols({}, {})
    for name, value in values.items():
        hint = 8 if value is None else value  # (an unknown data-dependent size: any hint compiles the same code)
        sym = env.create_symbol(hint, ConstantSource(name), dynamic_dim=DimDynamic.DYNAMIC)
        out.values[name] = env.create_symintnode(sym, hint=hint, source=ConstantSource(name))
        out.names[sym] = sympy.Symbol(name, integer=True, positive=True)
    return out


def symbolic_inputs(args: Sequence, symbolic: Sequence, sizes: dict[str, int | None]) -> tuple[list, _Symbols]:
    """Fake inputs over fresh symbols named as in `symbolic` (and fakes of the plain tensors), in one fake mode."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    symbols = _symbols(sizes, args, symbolic)
    env = next(iter(symbols.values.values())).node.shape_env if symbols.values else None
    mode = FakeTensorMode(shape_env=env, allow_non_fake_inputs=True)
    fakes = []
    for arg, spec in zip(args, symbolic):
        if isinstance(spec, str):
            fakes.append(eval(spec, {}, dict(symbols.values)))  # noqa: S307 (a size text the debug directory wrote)
        elif isinstance(spec, (tuple, list)) and isinstance(arg, torch.Tensor):
            shape, stride = (eval(text, {}, dict(symbols.values)) for text in spec)  # noqa: S307
            with mode:
                fakes.append(torch.empty_strided(shape, stride, dtype=arg.dtype, device=arg.device))
        elif isinstance(arg, torch.Tensor):
            fakes.append(mode.from_tensor(arg, static_shapes=True))
        else:
            fakes.append(arg)
    return fakes, symbols


def _propagate(gm: torch.fx.GraphModule, fakes: list) -> None:
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp
    mode = next(f.fake_mode for f in fakes if hasattr(f, "fake_mode"))
    with mode:
        FakeTensorProp(gm, mode).propagate_dont_convert_inputs(*fakes)


def compile_repro(gm: torch.fx.GraphModule, args: Sequence, symbolic: Sequence | None = None,
                  sizes: dict[str, int | None] | None = None, quiet: bool = False) -> Callable:
    """Compile `gm` with lens: over the size symbols where `symbolic` names some (one entry per input), else for
    the sizes of `args`; `quiet` leaves no debug folder (the minifier's and the node search's candidates)."""
    from compiler.pipeline import compile_graph_module, compile_quietly
    compile_fn = compile_quietly if quiet else compile_graph_module
    if _static(symbolic):
        return compile_fn(gm, list(args))
    fakes, _ = symbolic_inputs(args, symbolic, sizes or {})
    _propagate(gm, fakes)
    return compile_fn(gm, fakes)


def _placeholders(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "placeholder"]


@dataclass
class SymbolicGraph:
    """Which values of a written-out graph are over size symbols, by node name: the script's SYMBOLIC_INPUTS for
    its inputs, fake propagation for the rest, so the graphs cut out of it (a minifier candidate, one kernel) are
    compiled and written over the same symbols."""

    by_name: dict[str, Symbolic] = field(default_factory=dict)
    sizes: dict[str, int | None] = field(default_factory=dict)

    @classmethod
    def of(cls, gm: torch.fx.GraphModule, args: Sequence, symbolic: Sequence | None,
           sizes: dict[str, int | None] | None) -> "SymbolicGraph":
        sizes = dict(sizes or {})
        if _static(symbolic):
            return cls({}, sizes)
        fakes, symbols = symbolic_inputs(args, symbolic, sizes)
        copy = torch.fx.GraphModule(gm, gm.graph)
        _propagate(copy, fakes)
        by_name: dict[str, Symbolic] = {}
        for node in copy.graph.nodes:
            val = node.meta.get("val")
            if isinstance(val, torch.SymInt):
                by_name[node.name] = symbols.text(val)
            elif isinstance(val, torch.Tensor):
                shape, stride = symbols.shape_text(val.shape), symbols.shape_text(val.stride())
                by_name[node.name] = (shape, stride) if any(c.isalpha() for c in shape + stride) else None
        return cls(by_name, sizes)

    @property
    def symbolic(self) -> bool:
        return any(v is not None for v in self.by_name.values())

    def entries(self, gm: torch.fx.GraphModule) -> list[Symbolic]:
        """SYMBOLIC_INPUTS of a graph cut out of this one (an input `add_in` stands for the node `add`)."""
        return [self.by_name.get(n.name, self.by_name.get(n.name.removesuffix("_in"))) for n in _placeholders(gm)]

    def compile(self, gm: torch.fx.GraphModule, args: Sequence, quiet: bool = True) -> Callable:
        return compile_repro(gm, args, self.entries(gm), self.sizes, quiet=quiet)

    def repro_inputs(self, gm: torch.fx.GraphModule, args: Sequence) -> ReproInputs:
        """A cut-out graph's inputs as its script rebuilds them."""
        specs = []
        for arg, entry in zip(args, self.entries(gm)):
            if isinstance(entry, str):
                specs.append(InputSpec("size", size=entry))
            elif isinstance(entry, (tuple, list)) and isinstance(arg, torch.Tensor):
                specs.append(InputSpec("tensor", entry[0], entry[1], arg.dtype))
            else:
                specs.append(input_spec(arg, {}))
        return ReproInputs(specs, dict(self.sizes) if any(s.symbolic for s in specs) else {})
