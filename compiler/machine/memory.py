"""The buffer pool behind generated code's `empty_strided`: large buffers are served from blocks kept by
the pool, and a block is handed out again only once nothing but the pool references its storage.

Why: a fresh buffer of ≥ 32 MiB is a fresh `mmap` whose ~8,000 pages the kernel zeroes on first touch
(perf-notes.md), which costs more than the kernel that fills it. Reusing a block whose storage no
tensor, view, storage object or NumPy array of the user still references is safe: the check is the
storage's C++ use count plus the Python reference count of its storage object, both back at the values
they had when only the pool held the block.
"""
from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field

import torch

from compiler import config

# torch's own CPU allocation without the dispatcher (what Inductor's generated code calls): 0.4 us a small buffer
# against torch.empty_strided's 0.9; torch.empty_strided where a torch lacks it
try:
    from torch._C._dynamo.guards import _empty_strided_cpu as empty_strided_cpu
except ImportError:
    def empty_strided_cpu(size, stride, dtype: torch.dtype) -> torch.Tensor:
        return torch.empty_strided(size, stride, dtype=dtype)


@dataclass
class _Block:
    """One pooled allocation and the reference counts it shows when only the pool holds it."""

    tensor: torch.Tensor
    storage: torch.UntypedStorage
    cdata: int
    idle_use_count: int
    idle_refcount: int

    def is_idle(self) -> bool:
        return (torch._C._storage_Use_Count(self.cdata) == self.idle_use_count
                and sys.getrefcount(self.storage) == self.idle_refcount)


def _new_block(numel: int, dtype: torch.dtype) -> _Block:
    tensor = torch.empty(numel, dtype=dtype)
    storage = tensor.untyped_storage()
    block = _Block(tensor, storage, storage._cdata, 0, 0)
    del storage  # the counts below must be those of the block alone
    block.idle_use_count = torch._C._storage_Use_Count(block.cdata)
    block.idle_refcount = sys.getrefcount(block.storage)
    return block


@dataclass
class BufferPool:
    """Blocks by (element count, dtype); thread-safe."""

    blocks: dict[tuple[int, torch.dtype], list[_Block]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    hits: int = 0
    misses: int = 0

    def empty_strided(self, size, stride, dtype: torch.dtype) -> torch.Tensor:
        numel = storage_numel(size, stride)
        # settings are read at every allocation (config.cpp.buffer_pool, min_pool_bytes, max_blocks_per_size);
        # generated code allocates buffers below min_pool_bytes at compile time without the pool
        if not config.cpp.buffer_pool or numel * dtype.itemsize < config.cpp.min_pool_bytes:
            return empty_strided_cpu(size, stride, dtype)
        key = (numel, dtype)
        with self.lock:
            blocks = self.blocks.setdefault(key, [])
            for block in blocks:
                if block.is_idle():
                    self.hits += 1
                    return torch.as_strided(block.tensor, size, stride)
            self.misses += 1
            if len(blocks) >= config.cpp.max_blocks_per_size:
                return empty_strided_cpu(size, stride, dtype)
            block = _new_block(numel, dtype)
            blocks.append(block)
            return torch.as_strided(block.tensor, size, stride)

    def pooled_bytes(self) -> int:
        return sum(b.tensor.numel() * b.tensor.element_size() for bs in self.blocks.values() for b in bs)

    def clear(self) -> None:
        """Forget every block (memory a user still holds stays alive through the user's references)."""
        with self.lock:
            self.blocks.clear()


def storage_numel(size, stride) -> int:
    """Elements a buffer of this size and stride spans (what its storage must hold)."""
    numel = 1  # a plain loop: generator expressions cost ~1 us of every call's allocations
    for s, st in zip(size, stride):
        if s == 0:
            return 0
        numel += (s - 1) * st
    return numel


POOL = BufferPool()


def empty_strided(size, stride, dtype: torch.dtype) -> torch.Tensor:
    """`torch.empty_strided` for generated code, served from the process-wide pool."""
    return POOL.empty_strided(size, stride, dtype)
