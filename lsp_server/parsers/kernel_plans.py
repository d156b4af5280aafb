"""Parses `kernel_plans.json` (each generated kernel's plan and its decisions, ours) through the format package."""
from __future__ import annotations

from lens_format.kernel_plans import KernelPlanRecord, KernelPlansFile, PlanDecision, read_kernel_plans

parse_kernel_plans = read_kernel_plans
__all__ = ["KernelPlanRecord", "KernelPlansFile", "PlanDecision", "parse_kernel_plans"]
