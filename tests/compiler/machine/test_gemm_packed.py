"""Products from MKL's packed copy of a frozen weight (compiler/machine/gemm_packed.py): eager's results in both
weight orientations, with and without a bias, inside a compiled model; a weight changed in place is packed again
(never read stale); products the pack does not serve (small, few rows, unregistered weights, LENS_GEMM=aten,
switched off) run as before; a pack is freed with its weight."""
import gc

import pytest
import torch

from compiler import config
from compiler.machine import gemm, gemm_packed, gemm_rows, pch
from tests.compiler.conftest import linear_block_follows_weight_changes, record_results

pytestmark = pytest.mark.skipif(gemm_packed._functions() is None, reason="torch's BLAS is not MKL here")

M, K, N = 128, 512, 768  # (above gemm_packed.MIN_MACS)


@pytest.fixture
def packs(monkeypatch):
    """Two threads, the helper library built, and the products the pack served (its Python entry, wrapped)."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    gemm_rows.HELPER.get()  # (its first use starts its build in the background: wait for it)
    pch.wait_for_builds()
    assert gemm_rows.HELPER.get() is not None
    monkeypatch.setattr(config.cpp, "gemm_library", "auto")
    monkeypatch.setattr(config.cpp, "gemm_packed", True)
    monkeypatch.setattr(config.cpp, "gemm_rows", False)
    monkeypatch.setattr(config.cpp, "gemm_packed_max_bytes", 1 << 62)  # (whatever other tests left packed)
    monkeypatch.setattr(gemm, "onednn_is_faster", lambda: False)
    yield record_results(monkeypatch, gemm_packed, "mm_into")
    torch.set_num_threads(before)


def close(got, expected, k: int = K):
    tol = 4 * k * torch.finfo(torch.float32).eps * (k ** 0.5)
    torch.testing.assert_close(got, expected, atol=tol, rtol=1e-5)


@pytest.mark.parametrize("orientation", ["linear weight (N, K) read transposed", "(K, N) row-major"])
def test_products_from_a_pack_equal_eagers(packs, orientation):
    weight = torch.randn(N, K) if orientation.startswith("linear") else torch.randn(K, N)
    b = weight.t() if orientation.startswith("linear") else weight
    a, bias = torch.randn(M, K), torch.randn(N)
    gemm_packed.register([weight])
    before = gemm_packed.packed_count()
    close(gemm.mm(a, b, size=(M, N), stride=(N, 1)), a @ b)
    close(gemm.addmm(bias, a, b, size=(M, N), stride=(N, 1)), torch.addmm(bias, a, b))
    a_t = torch.randn(K, M).t()  # (an A operand read transposed)
    close(gemm.addmm(bias[None], a_t, b, size=(M, N), stride=(N, 1)), torch.addmm(bias[None], a_t, b))
    assert packs == [True] * 3
    assert gemm_packed.packed_count() == before + 1  # packed once, at its first product


def test_a_weight_changed_in_place_is_packed_again(packs):
    weight, a = torch.randn(N, K), torch.randn(M, K)
    gemm_packed.register([weight])
    close(gemm.mm(a, weight.t(), size=(M, N), stride=(N, 1)), a @ weight.t())
    weight.mul_(-2)  # (an optimizer step, copy_, load_state_dict: the version counter moves)
    close(gemm.mm(a, weight.t(), size=(M, N), stride=(N, 1)), a @ weight.t())
    weight[0].zero_()  # (through a view: the same counter)
    close(gemm.mm(a, weight.t(), size=(M, N), stride=(N, 1)), a @ weight.t())
    assert packs == [True] * 3


@pytest.mark.parametrize("case", ["unregistered", "small", "few rows", "aten", "switched off", "scaled"])
def test_what_the_pack_does_not_serve_runs_as_before(packs, monkeypatch, case):
    m, n = (16 if case == "few rows" else M), (64 if case == "small" else N)
    weight, a, bias = torch.randn(n, K), torch.randn(m, K), torch.randn(n)
    if case != "unregistered":
        gemm_packed.register([weight])
    if case == "aten":
        monkeypatch.setattr(config.cpp, "gemm_library", "aten")
    if case == "switched off":
        monkeypatch.setattr(config.cpp, "gemm_packed", False)
    beta = 0.5 if case == "scaled" else 1
    close(gemm.addmm(bias, a, weight.t(), beta=beta, size=(m, n), stride=(n, 1)),
          torch.addmm(bias, a, weight.t(), beta=beta))
    assert not any(packs)


def test_registering_a_weight_again_keeps_its_pack_and_its_count(packs):
    """(a recompile over the same parameters registers them again)"""
    weight, a = torch.randn(N, K), torch.randn(M, K)
    gemm_packed.register([weight])
    gemm.mm(a, weight.t(), size=(M, N), stride=(N, 1))
    before = gemm_packed._PACKED_BYTES
    gemm_packed.register([weight, weight.t()])
    close(gemm.mm(a, weight.t(), size=(M, N), stride=(N, 1)), a @ weight.t())
    assert gemm_packed._PACKS.packs_of(weight)
    assert gemm_packed._PACKED_BYTES == before
    del weight
    gc.collect()
    assert gemm_packed._PACKED_BYTES == before - 4 * N * K


def test_a_pack_is_freed_with_its_weight(packs):
    weight, a = torch.randn(N, K), torch.randn(M, K)
    gemm_packed.register([weight])
    gemm.mm(a, weight.t(), size=(M, N), stride=(N, 1))
    assert gemm_packed._PACKS.packs_of(weight)
    held = gemm_packed.packed_count()
    del weight
    gc.collect()
    assert gemm_packed.packed_count() == held - 1


def test_compiled_linear_layers_use_packs_and_never_read_a_stale_one(packs):
    """A Linear-GELU-Linear block compiled by lens under no_grad: its two products come from packs of the
    parameters (registered by freezing); after an in-place change of a weight, the next call equals eager's."""
    def first():
        assert packs.count(True) == 2

    def after_change():
        assert packs.count(True) == 4
    linear_block_follows_weight_changes(M, K, N, first, after_change)


def test_packs_stop_at_their_byte_cap(packs, monkeypatch):
    first, second, a = torch.randn(N, K), torch.randn(N, K), torch.randn(M, K)
    gemm_packed.register([first, second])
    monkeypatch.setattr(config.cpp, "gemm_packed_max_bytes", gemm_packed._PACKED_BYTES + 4 * N * K)
    close(gemm.mm(a, first.t(), size=(M, N), stride=(N, 1)), a @ first.t())
    monkeypatch.setattr(config.cpp, "gemm_packed_max_bytes", gemm_packed._PACKED_BYTES)
    close(gemm.mm(a, second.t(), size=(M, N), stride=(N, 1)), a @ second.t())  # (past the cap: no pack)
    assert packs == [True, False]
    held = gemm_packed._PACKED_BYTES
    del first
    gc.collect()
    assert gemm_packed._PACKED_BYTES < held  # (a freed weight's pack no longer counts)
