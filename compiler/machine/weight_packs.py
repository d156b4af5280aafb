"""Packs of frozen weights, kept per weight: registered tensors are held weakly (a registration ends with its tensor),
each with the version counter its packs were made at and its packs by the caller's key; an in-place change (the
counter moves: an optimizer step, `copy_`) drops them, so a pack is never read stale. gemm_packed.py (MKL's packed B
operands) and conv_packed.py (oneDNN's reordered convolution weights) keep theirs in one registry each."""
from __future__ import annotations

import weakref
from typing import Callable

import torch


class _Constant:
    """A registered tensor (weakly), the version counter its packs were made at, its packs by key."""

    def __init__(self, tensor: torch.Tensor, forget: Callable[[int], None]):
        key = tensor.untyped_storage().data_ptr()
        self.ref = weakref.ref(tensor, lambda _ref, key=key: forget(key))
        self.version = tensor._version
        self.packs: dict[tuple, torch.Tensor] = {}


class PackRegistry:
    """Registered weights (by storage data pointer) and their packs; `accepts` says which tensors may register,
    `on_drop` is told of each set of packs dropped (before they go)."""

    def __init__(self, accepts: Callable[[torch.Tensor], bool],
                 on_drop: Callable[[dict[tuple, torch.Tensor]], None] | None = None):
        self._accepts, self._on_drop = accepts, on_drop
        self._constants: dict[int, _Constant] = {}

    def register(self, tensors) -> None:
        """Marks the accepted tensors as weights whose packs may be kept. A storage already registered to a live
        tensor keeps that registration and its packs (a recompile over the same parameters registers them again)."""
        for t in tensors:
            if isinstance(t, torch.Tensor) and t.device.type == "cpu" and t.layout == torch.strided \
                    and t.numel() > 0 and self._accepts(t):
                key = t.untyped_storage().data_ptr()
                held = self._constants.get(key)
                if held is None or held.ref() is None:
                    self._constants[key] = _Constant(t, self._forget)

    def packs_of(self, weight: torch.Tensor) -> dict[tuple, torch.Tensor] | None:
        """The packs kept for `weight`'s registered storage, emptied first if it changed in place since they were
        made; None when it is not registered (or its tensor is gone)."""
        constant = self._constants.get(weight.untyped_storage().data_ptr())
        owner = constant.ref() if constant is not None else None
        if owner is None:
            return None
        if owner._version != constant.version:
            self._drop(constant)
            constant.version = owner._version
        return constant.packs

    def __bool__(self) -> bool:
        """Whether any weight is registered (a product's fast way out when none is)."""
        return bool(self._constants)

    def packed_count(self) -> int:
        """How many packs are held (tests)."""
        return sum(len(c.packs) for c in self._constants.values())

    def _drop(self, constant: _Constant) -> None:
        if self._on_drop is not None:
            self._on_drop(constant.packs)
        constant.packs.clear()

    def _forget(self, key: int) -> None:
        constant = self._constants.pop(key, None)
        if constant is not None:
            self._drop(constant)


class RecentPack:
    """The pack a call site used last: its weight (weakly; `forget` is called when the weight goes), the weight's
    version counter then, and the call's `geometry` (whatever else the pack was made for)."""
    __slots__ = ("geometry", "packed", "ref", "version")

    def __init__(self, weight: torch.Tensor, geometry, packed, forget: Callable[[weakref.ref], None] | None = None):
        self.ref, self.version = weakref.ref(weight, forget), weight._version
        self.geometry, self.packed = geometry, packed

    def serves(self, weight: torch.Tensor, geometry) -> bool:
        """Whether a call of `weight` (the same live tensor, unchanged in place since) with `geometry` may use it."""
        return self.ref() is weight and self.version == weight._version and self.geometry == geometry
