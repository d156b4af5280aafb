"""Each kernel plan's decisions for the debug directory (`kernel_plans.json`, lens_format/kernel_plans.py): the
frontend begins one graph's collection, the renderer reports each plan it prints, the frontend writes the file.
A failure here is logged and the compile goes on without the record."""
from __future__ import annotations

import logging
from contextvars import ContextVar

from compiler import config
from compiler.codegen.plan import KernelPlan
from lens_format import kernel_plans as plans_format

log = logging.getLogger(__name__)
_plans: ContextVar[list[plans_format.KernelPlanRecord] | None] = ContextVar("lens_kernel_plans", default=None)


def begin() -> None:
    """Start collecting one graph's kernel plans (only with the debug directory on)."""
    _plans.set([] if config.debug else None)


def kernel_plan(plan: KernelPlan, size_variant: bool = False) -> None:
    """Report a kernel's plan (`size_variant`: planned for one of its size variants); a plan equal to one
    reported already is kept once."""
    found = _plans.get()
    if found is None:
        return
    try:
        record = to_record(plan, size_variant)
    except Exception as e:  # noqa: BLE001 (debug output never breaks a compile)
        log.warning("kernel-lens: the plan of %s could not be recorded: %s: %s", plan.kernel, type(e).__name__, e)
        return
    if record not in found:
        found.append(record)


def to_record(plan: KernelPlan, size_variant: bool = False) -> plans_format.KernelPlanRecord:
    """The plan as kernel_plans.json holds it."""
    prefetching = next((d.subject for d in plan.decisions if d.pass_name == "row prefetch" and d.choice != "no"), "")
    decisions = tuple(plans_format.PlanDecision(d.pass_name, d.subject, d.choice, d.reason) for d in plan.decisions)
    return plans_format.KernelPlanRecord(
        plan.kernel, plan.strategy, tuple(str(s) for s in plan.nest.sizes), plan.nest.parallel,
        tuple(sorted(plan.streamed)), prefetching, plan.deferred.node.name if plan.deferred else "", size_variant,
        tuple(plan.assumptions), decisions)


def finish(graph_id: str) -> dict | None:
    """kernel_plans.json's document for the graph begun last, or None when nothing was collected."""
    found = _plans.get()
    _plans.set(None)
    if found is None:
        return None
    return plans_format.KernelPlansFile(graph_id, found).to_json()
