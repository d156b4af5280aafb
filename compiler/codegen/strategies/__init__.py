"""Kernel strategies: each one a way to plan and print part of a kernel (streaming stores, row prefetch, the deferred
output pass, sibling loops, column reductions, lane reductions, exp/half lane loops, in-place outputs, size variants)."""
