"""The loop-level IR: value expressions over sympy indices, and the buffers that compute them.

A buffer's body is an expression tree evaluated at symbolic index variables (`x0, x1, ...` for the
output, `r0, r1, ...` for a reduction); every expression node remembers the FX node it came from.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable, Sequence, Union

import sympy
import torch

from compiler.ir.size_symbols import Size, is_static

Index = tuple[sympy.Expr, ...]


@dataclass(frozen=True, eq=False)
class Expr:
    """One value computed per loop iteration."""

    dtype: torch.dtype
    origin: str | None  # the FX node this value comes from


@dataclass(frozen=True, eq=False)
class Load(Expr):
    buffer: str
    index: Index  # one index per dimension of the buffer's logical shape


@dataclass(frozen=True, eq=False)
class Constant(Expr):
    value: Union[int, float, bool]


@dataclass(frozen=True, eq=False)
class IndexValue(Expr):
    expr: sympy.Expr


@dataclass(frozen=True, eq=False)
class Op(Expr):
    name: str  # a key of compiler.codegen.cpp_ops.CPP_OPS
    args: tuple[Expr, ...]


@dataclass(frozen=True, eq=False)
class Cast(Expr):
    arg: Expr


Loader = Callable[[Sequence[sympy.Expr]], Expr]
ReductionLoader = Callable[[Sequence[sympy.Expr], Sequence[sympy.Expr]], Expr]

REDUCTION_TYPES = ("sum", "prod", "max", "min", "argmax", "argmin", "any", "all")
# torch.special's orthogonal polynomials as `Op`s over (x, n), named as aten's `special_<name>`: lowering makes them,
# cpp_text/special_math.py prints them
POLYNOMIAL_OPS = ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
                  "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
                  "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
                  "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p")


def index_vars(n: int, prefix: str = "x") -> list[sympy.Symbol]:
    return [sympy.Symbol(f"{prefix}{i}", integer=True, nonnegative=True) for i in range(n)]


def contiguous_strides(size: Sequence[Size]) -> tuple[Size, ...]:
    strides, acc = [], 1
    for s in reversed(size):
        strides.append(acc)
        acc *= max(int(s), 1) if is_static(s) else s  # (a symbolic size is at least 2: Dynamo specializes 0, 1)
    return tuple(reversed(strides))


@dataclass
class Layout:
    size: tuple[Size, ...]  # ints, or sympy expressions of Dynamo's size symbols (compiler/ir/size_symbols.py)
    stride: tuple[Size, ...]

    def flat_index(self, index: Sequence[sympy.Expr]) -> sympy.Expr:
        return sympy.expand(sum((i * s for i, s in zip(index, self.stride) if s), sympy.Integer(0)))

    @property
    def numel(self) -> int:
        n = 1
        for s in self.size:
            n *= s
        return n


@dataclass
class InputBuffer:
    name: str
    dtype: torch.dtype
    layout: Layout


@dataclass
class ComputedBuffer:
    """A buffer computed by a loop nest: pointwise over `size`, or a reduction over `reduction_ranges`."""

    name: str
    dtype: torch.dtype
    layout: Layout
    body: Expr  # evaluated at `vars` (and `reduction_vars`)
    vars: list[sympy.Symbol]
    origins: list[str]  # FX nodes, in graph order
    origin: str  # the FX node whose value this buffer holds
    reduction_type: str | None = None
    reduction_ranges: tuple[int, ...] = ()
    reduction_vars: list[sympy.Symbol] = field(default_factory=list)
    is_output: bool = False
    # A sum lowering realized to free the large buffers it reads (lowering/graph.py, HELD_BYTES_BOUND): the scheduler
    # gives it a kernel of its own, so that its neighbours' kernels are those they were without it.
    alone: bool = False
    # The order its loops run over its dims (a permutation of them), None: the layout's order. The scheduler sets
    # it to fuse a pointwise node into a kernel whose outer loop is another of its dims (scheduler.py).
    loop_order: tuple[int, ...] | None = None

    @property
    def kind(self) -> str:
        return "reduction" if self.reduction_type else "pointwise"

    def reads(self) -> list[Load]:
        return [e for e in walk(self.body) if isinstance(e, Load)]


@dataclass
class ExternArg:
    """An argument of an extern call: a buffer (optionally viewed with as_strided) or a Python value."""

    buffer: str | None = None
    view: tuple[tuple[int, ...], tuple[int, ...], int] | None = None  # size, stride, offset
    value: object = None
    items: list["ExternArg"] | None = None  # a list argument (e.g. the tensors of cat)


@dataclass
class ExternCall:
    """A call to an ATen op: for ops without a lowering, and for mm/addmm/bmm/convolution."""

    name: str  # the buffer (or tuple) it defines
    target: str  # e.g. "aten.mm.default"
    args: list[ExternArg]
    kwargs: dict[str, ExternArg]
    outputs: list[tuple[str, torch.dtype, Layout] | None]  # per tuple element (single output: one)
    origin: str
    reason: str  # why this is not generated code
    is_tuple: bool = False
    # unbacked size symbols its result defines (nonzero's row count): symbol -> Python reading it after the call
    binds: list[tuple[sympy.Symbol, str]] = field(default_factory=list)

    origins: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.origins:
            self.origins = [self.origin]

    @property
    def kind(self) -> str:
        return "extern"


Node = Union[ComputedBuffer, ExternCall]


@dataclass
class GraphIR:
    """Everything the scheduler needs: inputs, nodes in topological order, and the graph's outputs."""

    inputs: list[InputBuffer]
    nodes: list[Node]
    # each output: ("buffer", name) for a computed/extern/input buffer, ("value", python value)
    outputs: list[tuple[str, object]]
    notes: list[str] = field(default_factory=list)
    # graphs with symbolic sizes: every placeholder in order (tensor inputs and SymInt ones), each symbol with
    # the Python that reads it from the inputs at the top of call(), and its example value (get_args())
    arg_names: list[str] = field(default_factory=list)
    bindings: list[tuple[sympy.Symbol, str]] = field(default_factory=list)
    hints: dict[sympy.Symbol, int] = field(default_factory=dict)
    scalar_inputs: dict[str, Size] = field(default_factory=dict)  # SymInt placeholder -> its expression

    def buffer_layouts(self) -> dict[str, tuple[torch.dtype, Layout]]:
        out: dict[str, tuple[torch.dtype, Layout]] = {b.name: (b.dtype, b.layout) for b in self.inputs}
        for n in self.nodes:
            if isinstance(n, ComputedBuffer):
                out[n.name] = (n.dtype, n.layout)
            else:
                for o in n.outputs:
                    if o is not None:
                        out[o[0]] = (o[1], o[2])
        return out


def children(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, Op):
        return e.args
    if isinstance(e, Cast):
        return (e.arg,)
    return ()


def walk(e: Expr):
    """Post-order traversal (children before parents), each node once."""
    seen: set[int] = set()
    stack: list[tuple[Expr, bool]] = [(e, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in seen:
            continue
        if expanded:
            seen.add(id(node))
            yield node
            continue
        stack.append((node, True))
        for c in reversed(children(node)):
            if id(c) not in seen:
                stack.append((c, False))


def rewrite_leaves(e: Expr, on_load: Callable[[Load], Expr],
                   on_index_value: Callable[[IndexValue], Expr] = lambda n: n) -> Expr:
    """The same tree with loads and index values replaced; ops and casts are rebuilt over their new
    children (shared subtrees stay shared)."""
    memo: dict[int, Expr] = {}
    for node in walk(e):
        if isinstance(node, Load):
            new = on_load(node)
        elif isinstance(node, IndexValue):
            new = on_index_value(node)
        elif isinstance(node, Op):
            new = dataclasses.replace(node, args=tuple(memo[id(a)] for a in node.args))
        elif isinstance(node, Cast):
            new = dataclasses.replace(node, arg=memo[id(node.arg)])
        else:
            new = node
        memo[id(node)] = new
    return memo[id(e)]


def substitute(e: Expr, mapping: dict[sympy.Symbol, sympy.Expr]) -> Expr:
    """The same tree with index variables replaced (shared subtrees stay shared)."""
    return rewrite_leaves(
        e, lambda ld: dataclasses.replace(ld, index=tuple(sympy.expand(i.xreplace(mapping)) for i in ld.index)),
        lambda iv: dataclasses.replace(iv, expr=iv.expr.xreplace(mapping)))


def format_expr(e: Expr) -> str:
    """A one-line rendering for the IR dumps."""
    if isinstance(e, Load):
        return f"load({e.buffer}, [{', '.join(str(i) for i in e.index)}])"
    if isinstance(e, Constant):
        return repr(e.value)
    if isinstance(e, IndexValue):
        return f"index({e.expr})"
    if isinstance(e, Cast):
        return f"to_{str(e.dtype).replace('torch.', '')}({format_expr(e.arg)})"
    if isinstance(e, Op):
        return f"{e.name}({', '.join(format_expr(a) for a in e.args)})"
    return "?"


def format_node(n: Node) -> str:
    """The block describing one IR node in ir_pre_fusion.txt / ir_post_fusion.txt."""
    if isinstance(n, ExternCall):
        lines = [f"{n.name}: ExternKernel({n.target})", f"  origins: {n.origins}", f"  reason: {n.reason}"]
        for o in n.outputs:
            if o is not None:
                lines.append(f"  output {o[0]}: {o[1]} size={list(o[2].size)} stride={list(o[2].stride)}")
        return "\n".join(lines)
    reads = sorted({ld.buffer for ld in n.reads()})
    lines = [
        f"{n.name}: ComputedBuffer({n.kind})",
        f"  dtype: {n.dtype}, size: {list(n.layout.size)}, stride: {list(n.layout.stride)}",
        f"  origins: {n.origins}",
        f"  reads: {reads}",
        f"  index vars: {[str(v) for v in n.vars]}",
    ]
    if n.loop_order is not None:
        lines.append(f"  loop order: {list(n.loop_order)}")
    if n.reduction_type:
        lines.append(f"  reduction: {n.reduction_type} over {list(n.reduction_ranges)} "
                     f"vars {[str(v) for v in n.reduction_vars]}")
    lines.append(f"  body: {format_expr(n.body)}")
    return "\n".join(lines)


def nonunit_dims(size: tuple[int, ...]) -> list[int]:
    return [d for d, s in enumerate(size) if s != 1]


def loop_dims(n: ComputedBuffer) -> list[int]:
    """The dims node `n`'s loops run over, outermost first: its non-unit dims in its loop order."""
    order = n.loop_order if n.loop_order is not None else range(len(n.layout.size))
    return [d for d in order if n.layout.size[d] != 1]


def loop_sizes(n: ComputedBuffer) -> tuple[int, ...]:
    """The sizes of node `n`'s loops, outermost first (loop_dims's)."""
    return tuple(n.layout.size[d] for d in loop_dims(n))
