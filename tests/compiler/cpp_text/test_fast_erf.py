"""`lens_erf` (compiler/cpp_text/fast_erf.py): on AVX-512 with g++ our own 16-lane erff (16 polynomials picked by
vpermps), within one float of the correctly rounded erf; elsewhere glibc's erff and its libmvec variant. Special
values are exact, the sign is odd-symmetric, the scalar tail gives the vector body's bits, and GELU (forward and
backward) stays within eager's tolerance."""
import pytest
import torch

from compiler.cpp_text import fast_erf
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
STEPS = 1 if FAST else 2  # floats between ours and the correctly rounded erf; glibc's erff: 1-2 ulp


def _steps_from_exact(got: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """How many float32 values lie between `got` and the correctly rounded erf(x) (0: the same value)."""
    rounded = torch.erf(x.double()).float()
    assert ((got < 0) == (rounded < 0)).all()
    return floats_between(got, rounded)


def _inputs() -> torch.Tensor:
    # every 4099th bit pattern over all finite floats, a dense grid over [-4.5, 4.5] (every interval's edges
    # included), the cut where erf rounds to 1 and its neighbours, subnormals
    spread = finite_float_spread()
    grid = torch.linspace(-4.5, 4.5, 720_001)
    edges = torch.tensor([k * fast_erf.WIDTH for k in range(17)] + [fast_erf.ONE_FROM, 3.91, 3.93])
    edges = torch.cat([edges, torch.nextafter(edges, torch.zeros(())), torch.nextafter(edges, edges * 2 + 1)])
    tiny = torch.tensor([1e-45, 1e-40, 1.1754944e-38, 1e-30, 1e-8])
    x = torch.cat([spread, grid, edges, tiny])
    return torch.cat([x, -x])


def test_erf_is_within_one_float_of_exact_and_special_values_are_exact(tmp_path):
    x = _inputs()
    got, graph = compile_with_debug(tmp_path, torch.erf, x)
    assert "lens_erf(" in (graph / "output_code.py").read_text()
    err = _steps_from_exact(got, x)
    assert err.max().item() <= STEPS, (x[err.argmax()].item(), got[err.argmax()].item())
    half = len(x) // 2
    assert torch.equal(got[:half], -got[half:])  # odd, bit for bit
    special = torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0, -0.0, 3.92, -50.0, 1e30])
    out = torch.compile(torch.erf, backend="lens")(special)
    assert out[:2].tolist() == [1.0, -1.0] and out[2].isnan()
    assert out[3].item() == 0.0 and not out[3].signbit() and out[4].signbit()
    assert out[5:].tolist() == [1.0, -1.0, 1.0]


def test_scalar_tail_gives_the_vector_body_bits():
    # 16 elements go through the 16-lane variant, the 17th through the scalar symbol
    x, out = scalar_tail_and_vector_body(torch.erf, [-3.7, 0.2, 1.5, -0.01, 2.6, -0.5, 1e-3, 0.74] * 2)
    assert _steps_from_exact(out, x).max() <= STEPS


def test_the_tables_are_the_fit_rounded_to_float():
    pytest.importorskip("numpy")
    offsets, coefficients = fast_erf.fit()
    assert offsets == fast_erf.OFFSETS
    fitted = torch.tensor(coefficients, dtype=torch.float64).float()
    literals = torch.tensor(fast_erf.COEFFICIENTS, dtype=torch.float64)
    tables = literals.float()
    assert torch.equal(tables.double(), literals)  # the literals are floats: C++ reads the values Python holds
    # a least-squares solve may differ in its last bits between BLAS builds: within one float of ours
    steps = (fitted.view(torch.int32).to(torch.int64) - tables.view(torch.int32).to(torch.int64)).abs()
    assert steps.max().item() <= 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_gelu_forward_and_backward_stay_close_to_eager(dtype):
    torch.manual_seed(0)
    x = (torch.randn(64, 300) * 3).to(dtype).requires_grad_()
    gelu = torch.nn.functional.gelu
    torch._dynamo.reset()
    compiled = torch.compile(lambda t: gelu(t) * 2, backend="lens")
    out = compiled(x)
    (grad,) = torch.autograd.grad(out.float().sum(), x)
    ref = gelu(x) * 2
    (ref_grad,) = torch.autograd.grad(ref.float().sum(), x)
    assert out.dtype == dtype
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(grad, ref_grad)


@pytest.mark.skipif(not FAST, reason="the 16-lane erff is built only on AVX-512 machines with -march=native")
def test_loops_call_the_16_lane_variant(tmp_path):
    asm = disassembly(tmp_path, torch.erf, torch.randn(4096))
    kernel = function_of(asm, "cpp_fused_erf_0._omp_fn.0")  # the parallel loop
    assert "<_ZGVeN16v_lens_erff>" in kernel, kernel
    body = function_of(asm, "_ZGVeN16v_lens_erff")
    assert body.count("vpermps") == 1 + fast_erf.DEGREE + 1 and "call" not in body  # no libm inside


def test_graphs_without_erf_do_not_compile_its_definition(tmp_path):
    _, graph = compile_with_debug(tmp_path, lambda x: x * 2 + 1, torch.randn(64))
    source = (graph / "output_code.py").read_text()
    assert "lens_erff_scalar" not in source and "lens_erf(float x)" in source  # declared in the prelude only
