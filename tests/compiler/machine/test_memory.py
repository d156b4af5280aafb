"""The buffer pool never hands out memory a user still references, and reuses it once dropped."""
import gc

import pytest
import torch

from compiler import config
from compiler.machine import memory

SIZE, STRIDE = (512, 256), (256, 1)  # 512 KiB of float32: pooled


@pytest.fixture
def pool(monkeypatch):
    monkeypatch.setattr(config.cpp, "buffer_pool", True)
    return memory.BufferPool()


def _ptr(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def test_reuses_a_dropped_buffer(pool):
    a = pool.empty_strided(SIZE, STRIDE, torch.float32)
    ptr = _ptr(a)
    del a
    b = pool.empty_strided(SIZE, STRIDE, torch.float32)
    assert _ptr(b) == ptr and b.shape == SIZE and b.stride() == STRIDE
    assert pool.hits == 1 and pool.misses == 1


@pytest.mark.parametrize("keep", ["tensor", "view", "storage", "numpy", "set_", "list"])
def test_never_reuses_memory_still_referenced(pool, keep):
    a = pool.empty_strided(SIZE, STRIDE, torch.float32)
    ptr = _ptr(a)
    held = {"tensor": lambda: a, "view": lambda: a[3:7].t(), "storage": lambda: a.untyped_storage(),
            "numpy": lambda: a.numpy(), "set_": lambda: torch.empty(0).set_(a.untyped_storage()),
            "list": lambda: [a.view(-1)]}[keep]()
    del a
    gc.collect()
    b = pool.empty_strided(SIZE, STRIDE, torch.float32)
    assert _ptr(b) != ptr
    del held
    c = pool.empty_strided(SIZE, STRIDE, torch.float32)
    assert _ptr(c) == ptr


def test_keys_on_dtype_and_size_and_caps_blocks(pool, monkeypatch):
    monkeypatch.setattr(config.cpp, "max_blocks_per_size", 2)
    held = [pool.empty_strided(SIZE, STRIDE, torch.float32) for _ in range(3)]
    assert len({_ptr(t) for t in held}) == 3
    assert len(pool.blocks[(SIZE[0] * SIZE[1], torch.float32)]) == 2
    other = pool.empty_strided(SIZE, STRIDE, torch.int32)
    assert other.dtype == torch.int32 and _ptr(other) not in {_ptr(t) for t in held}


def test_small_and_disabled_bypass_the_pool(pool, monkeypatch):
    small = pool.empty_strided((4, 4), (4, 1), torch.float32)
    assert small.shape == (4, 4) and not pool.blocks
    monkeypatch.setattr(config.cpp, "buffer_pool", False)
    big = pool.empty_strided(SIZE, STRIDE, torch.float32)
    assert big.shape == SIZE and not pool.blocks


def test_compiled_outputs_held_by_the_user_are_never_overwritten(monkeypatch):
    monkeypatch.setattr(config.cpp, "buffer_pool", True)
    torch._dynamo.reset()
    f = torch.compile(lambda x: x * 2 + 1, backend="lens")
    x = torch.randn(512, 512)
    outs = [f(x + i) for i in range(6)]  # every output kept
    for i, o in enumerate(outs):
        torch.testing.assert_close(o, (x + i) * 2 + 1)
    assert len({_ptr(o) for o in outs}) == 6
    del outs, o
    again = f(x)
    torch.testing.assert_close(again, x * 2 + 1)
    assert _ptr(again) in {b.storage.data_ptr() for bs in memory.POOL.blocks.values() for b in bs}


def test_generated_code_allocates_small_buffers_with_torch_and_large_ones_from_the_pool(tmp_path, monkeypatch):
    from tests.compiler.conftest import compile_with_debug
    monkeypatch.setattr(config.cpp, "min_pool_bytes", 4096)
    x = torch.randn(64, 32)  # 8 KiB

    def fn(x):
        return x * 2, x.sum(-1)  # an 8 KiB output (pooled) and a 256 B one (torch's)

    (big, small), graph = compile_with_debug(tmp_path, fn, x)
    torch.testing.assert_close(big, x * 2)
    torch.testing.assert_close(small, x.sum(-1))
    code = (graph / "output_code.py").read_text()
    assert " = empty_strided((64, 32), (32, 1), dtype=torch.float32)" in code
    assert " = empty_strided_cpu((64,), (1,), torch.float32)" in code
