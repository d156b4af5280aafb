"""Dependency analysis and fusion: groups IR buffers into kernels that share an outer loop.

Pointwise buffers fuse with pointwise consumers, with reductions over the same outer index (prologues
and epilogues), and horizontally with same-shape neighbours; a consumer joins only if each value it
reads from the group was produced in the same outer iteration. Extern calls stand alone.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from compiler import config
from compiler import decisions as why
from compiler.ir.duplicates import drop_duplicates
from compiler.ir.index_functions import is_zero
from compiler.ir.nodes import (
    ComputedBuffer,
    ExternArg,
    ExternCall,
    GraphIR,
    Load,
    loop_dims,
    loop_sizes,
    nonunit_dims,
)

# The look-back (_row_kernel) joins a node only where its row's innermost contiguous run has at least this many
# elements (a size unknown at compile time: never). Below it the activation in a flat kernel of its own was as fast or
# faster: BN + ReLU6/hardswish training forwards joined 1.04-1.27x at 7x7 (batch 1-4), up to 1.11x at 14x14, 0.79-0.97x
# from 16x16 up (docs/performance.md "Row-size floor for BN + activation joint loops").
LOOK_BACK_MIN_RUN = 256


@dataclass
class FusedKernel:
    """One generated C++ function: `nodes` run in order inside a shared outer loop nest `outer`."""

    nodes: list[ComputedBuffer]
    outer: tuple[int, ...]
    has_reduction: bool
    name: str = ""
    origins: list[str] = field(default_factory=list)
    # Buffers no other step and no graph output reads: the renderer keeps them in registers or in a
    # per-iteration array instead of a full-size buffer.
    local: set[str] = field(default_factory=set)
    # Graph outputs that no step reads (not even a later node of this kernel): written once and handed to
    # the caller, so large ones may bypass the cache (codegen/strategies/streaming.py).
    unread_outputs: set[str] = field(default_factory=set)
    # Dynamo's size symbols -> their example values (a graph over symbolic sizes): what codegen/strategies/size_variants.py
    # chooses strategies from, each choice checked at run time.
    hints: dict = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return "reduction" if self.has_reduction else "pointwise"

    def buffers(self) -> set[str]:
        return {n.name for n in self.nodes}


Step = FusedKernel | ExternCall


@dataclass
class ScheduledGraph:
    ir: GraphIR
    steps: list[Step]

    @property
    def kernels(self) -> list[FusedKernel]:
        return [s for s in self.steps if isinstance(s, FusedKernel)]


def _common_prefix(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def _outer_after_join(k: FusedKernel, node: ComputedBuffer) -> tuple[int, ...] | None:
    dims = loop_sizes(node)
    if node.reduction_type:
        if k.has_reduction:
            return dims if dims == k.outer else None
        return dims if k.outer[:len(dims)] == dims else None
    if k.has_reduction:
        return k.outer if dims[:len(k.outer)] == k.outer else None
    prefix = _common_prefix(k.outer, dims)
    if not prefix and (k.outer or dims):
        return None
    return prefix


def _reads_same_iteration(consumer: ComputedBuffer, producer: ComputedBuffer, depth: int) -> bool:
    """Every load of `producer` by `consumer` touches only the outer iteration it runs in."""
    c_vars = [consumer.vars[d] for d in loop_dims(consumer)][:depth]
    p_dims = loop_dims(producer)[:depth]
    for ld in consumer.reads():
        if ld.buffer != producer.name:
            continue
        for j, d in enumerate(p_dims):
            if not is_zero(ld.index[d] - c_vars[j]):
                return False
    return True


def _can_join(k: FusedKernel, node: ComputedBuffer, record: bool = True) -> tuple[int, ...] | None:
    """The kernel's outer loops with `node` joined, None (a refusal `why` reports, when `record`) if it cannot."""
    refused = why.fusion_refused if record else (lambda *args, **kwargs: None)
    if node.alone or k.nodes[-1].alone:
        return refused(k, node, "alone")
    if len(set(k.origins) | set(node.origins)) > config.max_fusion_size:
        return refused(k, node, "max_fusion_size")
    outer = _outer_after_join(k, node)
    if outer is None:
        return refused(k, node, "loop_shape", shape=loop_sizes(node), outer=k.outer)
    members = {n.name: n for n in k.nodes}
    for ld in node.reads():
        producer = members.get(ld.buffer)
        if producer is not None and not _reads_same_iteration(node, producer, len(outer)):
            return refused(k, node, "other_iteration", producer=producer.origin)
    return outer


def _loop_order_for(k: FusedKernel, node: ComputedBuffer) -> tuple[int, ...] | None:
    """A loop order under which pointwise `node` runs inside reduction kernel `k`'s outer loops: the dims at
    which it reads the kernel's results first, then the others in layout order. BatchNorm's backward reduces
    over (N, H, W) for each channel, then its input gradient reads those sums for each channel again: run by
    channel, its inputs are read a second time while still in cache, in one kernel (as Inductor's). None where
    the reorder would put its innermost (smallest-stride) dim outside, or reads no result of the kernel."""
    if node.reduction_type or not k.has_reduction or not k.outer or node.loop_order is not None or \
            not all(isinstance(v, int) for v in (*node.layout.size, *node.layout.stride, *k.outer)):
        return None  # (static sizes: which dim is innermost is a question of the sizes' values otherwise)
    members = {n.name: n for n in k.nodes}
    dims = nonunit_dims(node.layout.size)
    if len(dims) <= len(k.outer):
        return None
    innermost = min(dims, key=lambda d: (abs(node.layout.stride[d]), -d))
    for ld in node.reads():
        producer = members.get(ld.buffer)
        if producer is None:
            continue
        picked = []
        for d in loop_dims(producer)[:len(k.outer)]:
            match = [e for e in dims if is_zero(ld.index[d] - node.vars[e])]
            if len(match) != 1:
                return None
            picked.append(match[0])
        if len(picked) != len(k.outer) or len(set(picked)) != len(picked) or innermost in picked:
            return None
        return (*picked, *[d for d in range(len(node.layout.size)) if d not in picked])
    return None


def _join_reordered(k: FusedKernel, node: ComputedBuffer) -> tuple[int, ...] | None:
    """The kernel's outer loops with `node` joined in another loop order (set on the node), None (the node
    unchanged) where no order joins."""
    if not config.loop_reorder or _outer_after_join(k, node) is not None:
        return None
    order = _loop_order_for(k, node)
    if order is None:
        return None
    node.loop_order = order
    outer = _can_join(k, node, record=False)
    if outer is None:
        node.loop_order = None
    return outer


def _join_outer(k: FusedKernel, node: ComputedBuffer, record: bool) -> tuple[int, ...] | None:
    return _join_reordered(k, node) or _can_join(k, node, record)


def _kernel_to_join(steps: list[Step], current: FusedKernel | None,
                    node: ComputedBuffer) -> tuple[FusedKernel, tuple[int, ...]] | None:
    """The kernel `node` joins and its outer loops then: the earlier kernel whose row it reads back (_row_kernel), else
    the current (last) one; None (the refusal recorded against the current kernel) where neither joins."""
    if current is None:
        return None
    joined = _row_kernel(steps, node)
    if joined is not None:
        return joined
    outer = _join_outer(current, node, record=False)
    if outer is not None:
        return current, outer
    _can_join(current, node)  # (records why it did not join the current kernel)
    return None


def _row_kernel(steps: list[Step], node: ComputedBuffer, window: int = 4) -> tuple[FusedKernel, tuple[int, ...]] | None:
    """An earlier kernel of the last `window` (no extern call between) that `node`, with loops of its own inside the
    kernel's outer ones, joins because it reads a node of the kernel that has such loops too (a row), where no later
    kernel computes anything `node` reads. BatchNorm's `num_batches_tracked + 1` (a scalar) and the running statistics
    (per channel) come between the statistics kernel and the activation reading its normalized output: the activation
    ran in a kernel of their own, reading the output back from memory; in the statistics kernel it runs in the loop
    that writes it (codegen/strategies/joint_loops.py). Not where the row's innermost run is short (_long_run)."""
    reads = {ld.buffer for ld in node.reads()}
    for k in list(reversed(steps))[:window]:
        if not isinstance(k, FusedKernel):
            return None
        rows = {n.name for n in k.nodes if len(loop_sizes(n)) > len(k.outer)}
        if k is not steps[-1] and len(loop_sizes(node)) > len(k.outer) and reads & rows:
            order = node.loop_order
            outer = _join_outer(k, node, record=False)
            if outer is None or not _long_run(node, len(outer)):
                node.loop_order = order
                return None
            return k, outer
        if reads & k.buffers():
            return None
    return None


def _long_run(node: ComputedBuffer, outer: int) -> bool:
    """Whether the elements `node`'s loops inside the first `outer` walk contiguously from its innermost loop
    out are known to be at least LOOK_BACK_MIN_RUN."""
    run = sympy.Integer(1)
    for d in reversed(loop_dims(node)[outer:]):
        if sympy.expand(node.layout.stride[d] - run) != 0:
            break
        run = run * node.layout.size[d]
    return bool(run.is_number and run >= LOOK_BACK_MIN_RUN)


def kernel_name(origins: list[str], op_names: dict[str, str], index: int) -> str:
    ops = sorted({op_names.get(o, o) for o in origins})
    return "cpp_fused_" + "_".join(ops[:6]) + f"_{index}"


def schedule(ir: GraphIR, op_names: dict[str, str]) -> ScheduledGraph:
    """Greedy fusion in topological order; `op_names` gives each FX node's op name for kernel names."""
    steps: list[Step] = []
    current: FusedKernel | None = None
    for node in ir.nodes:
        if isinstance(node, ExternCall):
            steps.append(node)
            current = None
            continue
        joined = _kernel_to_join(steps, current, node)
        if joined is not None:
            k, outer = joined
            k.nodes.append(node)
            k.outer = outer
            k.has_reduction = k.has_reduction or bool(node.reduction_type)
            k.origins = sorted(set(k.origins) | set(node.origins), key=ir_order(ir))
            continue
        current = FusedKernel([node], loop_sizes(node), bool(node.reduction_type), origins=list(node.origins),
                              hints=ir.hints)
        steps.append(current)
    for i, k in enumerate(s for s in steps if isinstance(s, FusedKernel)):
        k.name = kernel_name(k.origins, op_names, i)
    sg = ScheduledGraph(ir, steps)
    mark_local_buffers(sg)
    for k in sg.kernels:
        k.nodes = drop_duplicates(k.nodes, k.local)
    return sg


def _extern_buffers(a: ExternArg) -> list[str]:
    if a.items is not None:
        return [b for x in a.items for b in _extern_buffers(x)]
    return [a.buffer] if a.buffer else []


def graph_output_buffers(ir: GraphIR) -> set[str]:
    out = {name for kind, name in ir.outputs if kind == "buffer"}
    return out | {v.buffer for kind, v in ir.outputs if kind == "view"}


def mark_local_buffers(sg: ScheduledGraph) -> None:
    """A kernel's buffer is local when only that kernel reads it and it is not a graph output; outputs no
    step reads are the kernel's `unread_outputs`."""
    readers: dict[str, set[int]] = {}
    for i, step in enumerate(sg.steps):
        if isinstance(step, FusedKernel):
            names = {ld.buffer for n in step.nodes for ld in n.reads()}
        else:
            names = {b for a in list(step.args) + list(step.kwargs.values()) for b in _extern_buffers(a)}
        for name in names:
            readers.setdefault(name, set()).add(i)
    outputs = graph_output_buffers(sg.ir)
    for i, step in enumerate(sg.steps):
        if isinstance(step, FusedKernel):
            step.local = {n.name for n in step.nodes if n.name not in outputs and readers.get(n.name, set()) <= {i}}
            step.unread_outputs = {n.name for n in step.nodes if n.name in outputs and not readers.get(n.name)}


def ir_order(ir: GraphIR):
    order: dict[str, int] = {}
    for n in ir.nodes:
        for o in n.origins:
            order.setdefault(o, len(order))
    return lambda name: order.get(name, len(order))


def format_schedule(sg: ScheduledGraph) -> str:
    """The body of ir_post_fusion.txt."""
    from compiler.ir.nodes import format_node
    out = []
    for step in sg.steps:
        if isinstance(step, ExternCall):
            out.append(format_node(step))
        else:
            out.append(f"{step.name}: FusedKernel({step.kind}) outer={list(step.outer)} "
                       f"nodes={[n.name for n in step.nodes]}")
            out.extend("  " + line for n in step.nodes for line in format_node(n).splitlines())
        out.append("")
    return "\n".join(out)


__all__ = ["schedule", "ScheduledGraph", "FusedKernel", "format_schedule", "Load"]
