"""`lens_exp` (compiler/cpp_text/vector_math.py): on AVX-512 with g++ our own 16-lane expf, within 1 ulp of the
correctly rounded exp as eager's Sleef expf is; elsewhere glibc's expf and its libmvec vector variants, within
their documented 4 ulp (3 seen at -37.78 on an AVX2 machine; OpInfo's float32 exp tolerance is ~11 ulp). Special
values are exact everywhere, and the scalar tail computes the same bits as the vector body."""
import pytest
import torch

from compiler.machine import build
from tests.compiler.conftest import (
    compile_with_debug,
    disassembly,
    finite_float_spread,
    floats_between,
    function_of,
    scalar_tail_and_vector_body,
)

FAST = bool(build.isa_flags())  # -march=native on an AVX-512 machine: what the prelude's #if sees
ULPS = 1 if FAST else 4  # our expf's bound, else glibc's (libmvec)


def _ulps_from_exact(got: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """How many float32 values lie between `got` and the correctly rounded exp(x) (0: the same value)."""
    return floats_between(got, torch.exp(x.double()).float())


def _inputs() -> torch.Tensor:
    # a spread of bit patterns over all finite floats (every 4099th), a dense grid over the range where exp
    # is neither 0 nor inf, the edges of that range, and the special values
    spread = finite_float_spread()
    grid = torch.linspace(-105.0, 90.0, 400_003)
    edges = torch.tensor([88.72283, 88.72284, 88.7228394, -87.33654, -103.27893, -103.97208, -104.0, -104.5])
    edges = torch.cat([edges, torch.nextafter(edges, torch.zeros(())), torch.nextafter(edges, edges * 2)])
    special = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), 1e-30, -1e-30, 1.0, -1.0])
    return torch.cat([spread, grid, edges, special])


def test_exp_is_within_one_ulp_of_exact_and_special_values_are_exact(tmp_path):
    x = _inputs()
    got, graph = compile_with_debug(tmp_path, torch.exp, x)
    assert "lens_exp(" in (graph / "output_code.py").read_text()
    err = _ulps_from_exact(got, x)
    assert err.max().item() <= ULPS, (x[err.argmax()].item(), got[err.argmax()].item())
    special = torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0, -0.0, 89.0, -120.0])
    out = torch.compile(torch.exp, backend="lens")(special)
    assert out[:2].tolist() == [float("inf"), 0.0] and out[2].isnan()
    assert out[3:].tolist() == [1.0, 1.0, float("inf"), 0.0]


def test_scalar_tail_gives_the_vector_body_bits():
    # 16 elements go through the 16-lane variant, the 17th through the scalar symbol
    x, out = scalar_tail_and_vector_body(torch.exp, [-3.7, 0.2, 11.5, -80.1, 42.0, -0.5, 1e-3, 7.25] * 2)
    assert _ulps_from_exact(out, x).max() <= ULPS


@pytest.mark.parametrize("shape", [(8, 1000), (3, 17), (64, 1024)])
def test_softmax_and_sigmoid_stay_close_to_eager(same, shape):
    x = torch.randn(shape) * 6
    same(lambda t: (torch.softmax(t, -1), torch.sigmoid(t), torch.exp(t) * 2, torch.exp(t.double())), x)


@pytest.mark.skipif(not FAST, reason="the 16-lane expf is built only on AVX-512 machines with -march=native")
def test_loops_call_the_16_lane_variant(tmp_path):
    kernel = function_of(disassembly(tmp_path, torch.exp, torch.randn(4096)), "cpp_fused_exp_0._omp_fn.0")
    assert "call" in kernel and "<_ZGVeN16v_lens_expf>" in kernel, kernel


def test_graphs_without_exp_do_not_compile_its_definition(tmp_path):
    _, graph = compile_with_debug(tmp_path, lambda x: x * 2 + 1, torch.randn(64))
    source = (graph / "output_code.py").read_text()
    assert "lens_expf_scalar" not in source and "lens_exp(float x)" in source  # declared in the prelude only
