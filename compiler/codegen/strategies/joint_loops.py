"""One loop for a row's pointwise node and a later pointwise node reading it back at the same element: in a training
BatchNorm's kernel the normalized output (saved for the activation's backward) is written in the output pass and the
activation (ReLU6, hardswish) read it back in a loop of its own, a second pass over the row. Planned here, the later
node (the follower) is computed in its leader's innermost loop from the leader's value, not loaded again: one pass
writes both. Kernel alone, the generated forward of BatchNorm2d(96) + ReLU6 on (1, 96, 112, 112): 891 -> 738 us.

A follower joins where both run in the nest's loops with inner loops of the same sizes and pragmas, neither streamed,
split into ranges, written over an input, nor half precision (its stored bits are not the value read back); every
read of the leader's buffer in the follower is at the element the leader stores in that iteration; and the follower
reads no node printed between the two (it moves up to its leader's loop). Anything else keeps its own loops."""
from __future__ import annotations

import sympy

from compiler.codegen import half
from compiler.codegen.plan import InnerLoops, KernelPlan, PlanContext
from compiler.ir.nodes import ComputedBuffer, Load, substitute, walk


def plan_joint(plan: KernelPlan, ctx: PlanContext) -> None:
    """plan.joint: each leader's followers (in kernel order), and the followers' bodies in its loops."""
    if plan.strategy != "nest" or plan.deferred or plan.nest.splits:
        return
    nodes = ctx.kernel.nodes
    paired = set(plan.pairs) | {p.reduction for p in plan.pairs.values()}
    leader_of: dict[str, str] = {}
    for j, f in enumerate(nodes):
        if not _may_join(plan, ctx, f, paired):
            continue
        for i in range(j - 1, -1, -1):
            lead = nodes[i]
            if lead.name in leader_of or not _may_join(plan, ctx, lead, paired) or half.is_half(lead.dtype):
                continue
            moved = _in_leader_loop(plan, ctx, lead, f, nodes[i + 1:j])
            if moved is not None:
                leader_of[f.name] = lead.name
                plan.joint.setdefault(lead.name, []).append(f.name)
                plan.inner[f.name] = moved
                plan.decide("joint loops", f.name, f"in {lead.name}'s loop, reading its value",
                            f"it reads {lead.name} only at the element {lead.name} stores in that iteration")
                break


def _may_join(plan: KernelPlan, ctx: PlanContext, n: ComputedBuffer, paired: set[str]) -> bool:
    inner = plan.inner.get(n.name)
    return (not n.reduction_type and inner is not None and n.name not in paired and n.name not in plan.streamed
            and n.name not in ctx.inplace and not inner.streamed_row and not inner.splits)


def _in_leader_loop(plan: KernelPlan, ctx: PlanContext, lead: ComputedBuffer, f: ComputedBuffer,
                    between: list[ComputedBuffer]) -> InnerLoops | None:
    """Follower `f`'s loops renamed to leader `lead`'s, None where it cannot run in them."""
    li, fi = plan.inner[lead.name], plan.inner[f.name]
    if li.sizes != fi.sizes or li.pragmas != fi.pragmas:
        return None
    reads = {ld.buffer for ld in f.reads()}
    if lead.name not in reads or reads & {n.name for n in between}:
        return None
    rename = dict(zip(fi.vars, li.vars))
    body, store = substitute(fi.body, rename), sympy.expand(fi.store.xreplace(rename))
    written = sympy.expand(li.store)
    for ld in walk(body):
        if isinstance(ld, Load) and ld.buffer == lead.name and sympy.expand(ctx.flat(ld) - written) != 0:
            return None  # reads another element than the one this iteration writes
    return InnerLoops(li.vars, li.sizes, {}, li.pragmas, body, store)
