"""Parses `profile.json` (per-kernel times of one graph, eager vs compiled) through the format package."""
from __future__ import annotations

from lens_format.profile import CategoryTime, EagerOp, GraphProfile, KernelTime, read_profile

parse_profile = read_profile
__all__ = ["CategoryTime", "EagerOp", "GraphProfile", "KernelTime", "parse_profile"]
