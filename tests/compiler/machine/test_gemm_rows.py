"""Row-split float32 products (compiler/machine/gemm_rows.py): one OpenMP region, each thread MKL's sgemm on its
rows; results equal eager's product within a float32 product's rounding, in every operand layout; products it
cannot take (too few rows, one thread, other dtypes, autograd) go to ATen's mm."""
import pytest
import torch

from compiler import config
from compiler.machine import gemm, gemm_rows, pch
from tests.compiler.conftest import record_results

pytestmark = pytest.mark.skipif(gemm_rows.sgemm_address() is None, reason="torch's BLAS is not MKL here")


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def calls(monkeypatch):
    """How many products the helper ran (its Python entry, wrapped: the C++ call itself is what is tested)."""
    gemm_rows.HELPER.get()  # (its first use starts its build in the background: wait for it)
    pch.wait_for_builds()
    assert gemm_rows.HELPER.get() is not None
    seen = record_results(monkeypatch, gemm_rows, "mm_into")
    monkeypatch.setattr(config.cpp, "gemm_library", "auto")
    monkeypatch.setattr(config.cpp, "gemm_rows", True)
    monkeypatch.setattr(config.cpp, "gemm_packed", False)  # (frozen weights' packs: test_gemm_packed.py)
    monkeypatch.setattr(gemm, "onednn_is_faster", lambda: False)
    return seen


def operand(rows: int, cols: int, layout: str) -> torch.Tensor:
    """A (rows, cols) matrix: row-major, column-major (a transposed view), or row-major with padded rows."""
    if layout == "t":
        return torch.randn(cols, rows).t()
    if layout == "padded":
        return torch.randn(rows, cols + 7)[:, :cols]
    return torch.randn(rows, cols)


def close(got, expected, k: int):
    tol = 4 * k * torch.finfo(torch.float32).eps * (k ** 0.5)
    torch.testing.assert_close(got, expected, atol=tol, rtol=1e-5)


@pytest.mark.parametrize("m,k,n", [(64, 256, 80), (128, 768, 768), (300, 129, 257), (97, 1024, 33)])
@pytest.mark.parametrize("a_layout", ["dense", "t", "padded"])
@pytest.mark.parametrize("b_layout", ["dense", "t", "padded"])
def test_products_equal_eagers_in_every_layout(two_threads, calls, m, k, n, a_layout, b_layout):
    a, b, bias = operand(m, k, a_layout), operand(k, n, b_layout), torch.randn(n)
    close(gemm.mm(a, b, size=(m, n), stride=(n, 1)), a @ b, k)
    close(gemm.addmm(bias, a, b, size=(m, n), stride=(n, 1)), torch.addmm(bias, a, b), k)
    close(gemm.addmm(bias[None], a, b, size=(m, n), stride=(n, 1)), torch.addmm(bias[None], a, b), k)
    assert calls == [True] * 3


@pytest.mark.parametrize("case", ["few rows", "one thread", "float64", "matrix bias", "scaled", "aten", "switched off"])
def test_what_it_cannot_take_runs_in_aten(two_threads, calls, monkeypatch, case):
    m, k, n = (16 if case == "few rows" else 128), 256, 64
    dtype = torch.float64 if case == "float64" else torch.float32
    a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
    bias = torch.randn(m, n) if case == "matrix bias" else torch.randn(n)
    if case == "one thread":
        torch.set_num_threads(1)
    if case == "aten":
        monkeypatch.setattr(config.cpp, "gemm_library", "aten")
    if case == "switched off":  # (config.cpp.gemm_rows's default: ATen's own threading, unless LENS_GEMM_ROWS=1)
        monkeypatch.setattr(config.cpp, "gemm_rows", False)
    beta = 0.5 if case == "scaled" else 1
    got = gemm.addmm(bias.to(dtype), a, b, beta=beta, size=(m, n), stride=(n, 1))
    close(got.float(), torch.addmm(bias.to(dtype), a, b, beta=beta).float(), k)
    assert calls == []


def test_products_autograd_records_are_not_taken(two_threads):
    a, b = torch.randn(128, 256), torch.randn(256, 64, requires_grad=True)
    assert not gemm_rows.applies(a, b, None)
    with torch.no_grad():
        assert gemm_rows.applies(a, b, None)


@pytest.mark.parametrize("rows", [50, 128, 197])
def test_compiled_linear_stack_matches_eager(two_threads, calls, rows):
    """A Linear-GELU-Linear-residual-LayerNorm block (a transformer's feed-forward half) compiled by lens."""
    torch.manual_seed(0)
    up, down, norm = torch.nn.Linear(256, 1024), torch.nn.Linear(1024, 256), torch.nn.LayerNorm(256)

    def block(x):
        return norm(x + down(torch.nn.functional.gelu(up(x))))
    x = torch.randn(rows, 256)
    with torch.no_grad():
        torch._dynamo.reset()
        got = torch.compile(block, backend="lens")(x)
        torch.testing.assert_close(got, block(x), atol=1e-4, rtol=1e-4)
    assert calls == ([True] * 2 if rows >= 2 * gemm_rows.MIN_ROWS_PER_THREAD else [])
