"""Equal reductions of one kernel computed once: a kernel-local reduction node computing exactly what an earlier node
of the same kernel computes is dropped and its readers read the earlier one (the scheduler's last step per kernel)."""
from __future__ import annotations

import dataclasses

import sympy

from compiler.ir.nodes import Cast, ComputedBuffer, Expr, Load, Op, loop_sizes, nonunit_dims, rewrite_leaves, substitute


def _expr_key(e: Expr, memo: dict[int, tuple]) -> tuple:
    """A hashable structural key (sympy indices hash by structure; no string printing, which is slow)."""
    got = memo.get(id(e))
    if got is not None:
        return got
    if isinstance(e, Load):
        key: tuple = ("load", e.buffer, e.index)
    elif isinstance(e, Op):
        key = ("op", e.name, e.dtype, tuple(_expr_key(a, memo) for a in e.args))
    elif isinstance(e, Cast):
        key = ("cast", e.dtype, _expr_key(e.arg, memo))
    else:
        key = (type(e).__name__, e.dtype, getattr(e, "value", None), getattr(e, "expr", None))
    memo[id(e)] = key
    return key


def _node_key(n: ComputedBuffer) -> tuple:
    """Equal keys: the same value at the same logical element (unit dims, e.g. keepdim, ignored)."""
    dims = nonunit_dims(n.layout.size)  # (its non-unit dims' variables by position: a keepdim sum's equals a sum's)
    canonical = {n.vars[d]: sympy.Symbol(f"_dim{j}", integer=True, nonnegative=True) for j, d in enumerate(dims)}
    return (_expr_key(substitute(n.body, canonical), {}), tuple(n.reduction_vars),
            n.reduction_type, tuple(n.reduction_ranges), loop_sizes(n), n.dtype)


def rename_loads(e: Expr, names: dict[str, ComputedBuffer], dups: dict[str, ComputedBuffer]) -> Expr:
    """The same tree with loads of a duplicate in `dups` reading the node in `names` at the same logical
    element instead (shared subtrees stay shared)."""
    def index_in(ld: Load) -> tuple:
        dup, orig = dups[ld.buffer], names[ld.buffer]
        picked = [ld.index[d] for d in nonunit_dims(dup.layout.size)]
        index = [sympy.Integer(0)] * len(orig.layout.size)
        for d, i in zip(nonunit_dims(orig.layout.size), picked):
            index[d] = i
        return tuple(index)

    def on_load(ld: Load) -> Expr:
        if ld.buffer not in names:
            return ld
        return dataclasses.replace(ld, buffer=names[ld.buffer].name, index=index_in(ld))

    return rewrite_leaves(e, on_load)


def drop_duplicates(nodes: list[ComputedBuffer], local: set[str]) -> list[ComputedBuffer]:
    """A local node computing exactly what an earlier node of the kernel computes (LayerNorm's decomposition
    sums each row twice) is dropped; its readers read the earlier node."""
    seen: dict[tuple, ComputedBuffer] = {}
    renamed: dict[str, ComputedBuffer] = {}
    dups: dict[str, ComputedBuffer] = {}
    kept: list[ComputedBuffer] = []
    for n in nodes:
        if renamed:
            n.body = rename_loads(n.body, renamed, dups)
        if not n.reduction_type:  # only reductions are worth comparing (and only they repeat in practice)
            kept.append(n)
            continue
        key = _node_key(n)
        if n.name in local and key in seen:
            renamed[n.name], dups[n.name] = seen[key], n
            local.discard(n.name)
            continue
        if key in seen and seen[key].name in local:  # a buffer the graph needs (BatchNorm's saved mean) holding
            _copy_of(n, seen[key])                   # a local sum computed before: written from it, not summed again
        seen.setdefault(key, n)
        kept.append(n)
    return kept


def _copy_of(n: ComputedBuffer, earlier: ComputedBuffer) -> None:
    """Reduction node `n` made a pointwise copy of `earlier`, an equal reduction of the same kernel (same logical
    element: their non-unit dims in order)."""
    index = [sympy.Integer(0)] * len(earlier.layout.size)
    for d, e in zip(nonunit_dims(earlier.layout.size), nonunit_dims(n.layout.size)):
        index[d] = n.vars[e]
    n.body = Load(n.dtype, n.origin, earlier.name, tuple(index))
    n.reduction_type, n.reduction_ranges, n.reduction_vars = None, (), []
