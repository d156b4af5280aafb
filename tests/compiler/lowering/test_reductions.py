"""Reductions (and what decompositions make of var/std, softmax, log_softmax, layer_norm) vs eager."""
import re

import pytest
import torch

from tests.compiler.conftest import assert_same

SHAPES = [(33, 17), (4, 1, 9), (1, 70), (5,), (2, 3, 4, 5)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_float_reductions(shape, dtype):
    x = torch.randn(shape, dtype=dtype)
    assert_same(lambda x: (x.sum(), x.sum(-1), x.mean(0, keepdim=True), x.amax(-1), x.amin(0), x.argmax(-1),
                           x.argmin(), x.prod(0)), x, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.bool])
def test_integer_reductions(dtype):
    x = torch.randint(0, 4, (7, 9)).to(dtype)
    fns = lambda x: (x.sum(), x.sum(1), x.amax(0), x.amin(1), x.argmax(1), x.any(1), x.all())  # noqa: E731
    if dtype == torch.bool:
        fns = lambda x: (x.sum(), x.sum(1), x.any(1), x.all(), x.any())  # noqa: E731
    assert_same(fns, x)


@pytest.mark.parametrize("ord", [2, 1, 3.5, 0, float("inf"), -float("inf")])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_vector_norm_is_generated_natively(ord, dtype, tmp_path):
    from tests.compiler.conftest import compile_with_debug
    x = torch.randn(33, 70, dtype=dtype, generator=torch.Generator().manual_seed(0))
    x[0, :5] = 0
    fn = lambda t: (torch.linalg.vector_norm(t, ord, dim=-1), torch.linalg.vector_norm(t, ord))  # noqa: E731
    out, graph = compile_with_debug(tmp_path, fn, x)
    for got, expected in zip(out, fn(x)):
        # float32 sums of 2,310 terms in another order than ATen's: both are ~1e-6 from the exact sum
        torch.testing.assert_close(got, expected, rtol=5e-6 if dtype == torch.float32 else None,
                                   atol=1e-5 if dtype == torch.float32 else None)
    code = (graph / "output_code.py").read_text()
    assert "cpp_fused_" in code and "torch.ops.aten" not in code.split("def call", 1)[1]  # no ATen call


def test_max_min_dim_returns_values_and_indices():
    x = torch.randn(8, 11)
    assert_same(lambda x: (x.max(1), x.min(0, keepdim=True), x.max()), x)


def test_argmax_ties_and_nan_follow_eager():
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [float("nan"), 1.0, float("nan"), 2.0], [2.0, 2.0, 2.0, 2.0]])
    assert_same(lambda x: (x.argmax(1), x.argmin(1), x.amax(1), x.amin(1)), x)


@pytest.mark.parametrize("shape", [(64, 33), (8, 4, 128), (3, 1)], ids=str)
def test_softmax_logsoftmax_layernorm_var(shape):
    x = torch.randn(shape)
    n = shape[-1]
    assert_same(lambda x: (torch.softmax(x, -1), torch.log_softmax(x, 0), torch.nn.functional.layer_norm(x, (n,)),
                           x.var(-1), x.std(0, unbiased=False), torch.logsumexp(x, -1)), x, atol=1e-4, rtol=1e-4)


def test_layer_norm_with_affine_and_training_module():
    ln = torch.nn.LayerNorm(32)
    with torch.no_grad():
        ln.weight.uniform_()
        ln.bias.uniform_()
    assert_same(ln, torch.randn(10, 32), atol=1e-4, rtol=1e-4)


def test_column_reduction_then_pointwise():
    x = torch.randn(50, 20)
    assert_same(lambda x: x - x.mean(0), x, atol=1e-5)


COLUMN_CASES = {
    "sum0": lambda x: x.sum(0), "mean0": lambda x: x.mean(0), "amax0_nan": lambda x: x.amax(0),
    "amin0_relu": lambda x: x.amin(0).relu() * 2, "sum0_keepdim_add": lambda x: x.sum(0, keepdim=True) + 1,
    "sum_over_two_dims": lambda x: x.reshape(x.shape[0], 1, x.shape[1]).expand(-1, 3, -1).sum((0, 1)),
    "var0": lambda x: x.var(0), "std0_biased": lambda x: x.std(0, unbiased=False) + 1,
    "two_column_reductions": lambda x: (x.sum(0), (x * 2).amax(0)),
}


@pytest.mark.parametrize("shape", [(300, 70), (513, 260), (130, 7000), (1, 7)], ids=str)
@pytest.mark.parametrize("name", sorted(COLUMN_CASES))
def test_reductions_over_the_strided_dim_walk_contiguous_memory(name, shape, tmp_path):
    from tests.compiler.conftest import compile_with_debug
    torch.manual_seed(0)
    x = torch.randn(shape)
    x[shape[0] // 2, 3 % shape[1]] = float("nan")
    fn = COLUMN_CASES[name]
    out, graph = compile_with_debug(tmp_path, fn, x)
    torch.testing.assert_close(out, fn(x), equal_nan=True, rtol=1e-5, atol=1e-4)
    code = (graph / "output_code.py").read_text()
    if shape[1] > 2000:  # a thread's accumulators for every output would not fit in L1: blocks of outputs
        assert "x0_base" in code and "lens_parts" not in code
    elif shape[0] > 1:  # few outputs: threads split the rows, each walking its rows' contiguous memory
        assert "lens_parts" in code and "lens_row" in code and "x0_base" not in code


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32])
def test_column_reductions_split_by_rows_are_deterministic_and_accurate(threads, dtype):
    """Partials of a thread's rows are combined in thread order: the same bits on every call; float sums go
    through 64-row chunks into double partials, so they are at least as close to the exact sum as eager's."""
    torch.manual_seed(0)
    x = (torch.randn(6000, 96) * 10 + 30).to(dtype)
    fn = lambda t: (t.sum(0), t.amax(0), t.sum(0, keepdim=True) * 2)  # noqa: E731
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend="lens", dynamic=False)
        got, again = compiled(x), compiled(x)
    finally:
        torch.set_num_threads(old)
    expected = fn(x)
    for g, a, e in zip(got, again, expected):
        assert torch.equal(g, a)
        if dtype == torch.int32:
            assert torch.equal(g, e)
        else:
            torch.testing.assert_close(g, e)
    if dtype == torch.float32:
        exact = x.double().sum(0)
        assert (got[0].double() - exact).abs().max() <= (expected[0].double() - exact).abs().max()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.float64])
def test_column_reductions_split_by_rows_of_a_view_off_its_lines(dtype):
    """The chunk partials are placed against the input's address: an input 1 element past a line works too."""
    base = (torch.randn(3001, 129) * 10).to(dtype)
    x = base.reshape(-1)[1:1 + 3000 * 129].view(3000, 129)
    fn = lambda t: (t.sum(0), t.amin(0), t.to(torch.float64).mean(0))  # noqa: E731
    torch._dynamo.reset()
    tol = {"atol": 1e-3, "rtol": 1e-5} if dtype == torch.float32 else {}  # sums of 3,000 values ~10 in size
    for got, expected in zip(torch.compile(fn, backend="lens", dynamic=False)(x), fn(x)):
        torch.testing.assert_close(got, expected, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_column_sum_of_integers_and_doubles(dtype):
    x = torch.randint(-50, 50, (257, 130)).to(dtype)
    torch._dynamo.reset()
    got = torch.compile(lambda t: t.sum(0), backend="lens")(x)
    assert torch.equal(got, x.sum(0)) if dtype == torch.int64 else torch.allclose(got, x.sum(0))


TOTAL_CASES = {
    "sum": lambda x: x.sum(), "mean": lambda x: x.mean(), "mse": lambda x: ((x - 1) ** 2).mean(),
    "prod_near_one": lambda x: (x * 1e-3 + 1).prod(), "sum_1d_view": lambda x: x.reshape(-1).sum() * 2,
}


@pytest.mark.parametrize("name", sorted(TOTAL_CASES))
def test_reductions_to_one_value_split_across_threads(name, tmp_path):
    from tests.compiler.conftest import compile_with_debug
    torch.manual_seed(0)
    x = torch.randn(210, 333, dtype=torch.float64)
    fn = TOTAL_CASES[name]
    out, graph = compile_with_debug(tmp_path, fn, x)
    torch.testing.assert_close(out, fn(x))
    assert "lens_partials" in (graph / "output_code.py").read_text()
    again = torch.compile(fn, backend="lens")(x)
    assert torch.equal(again, out)  # partials are added in thread order: the same bits every run


def test_integer_total_sum_is_exact():
    x = torch.randint(-1000, 1000, (400, 300))
    torch._dynamo.reset()
    assert torch.equal(torch.compile(lambda t: t.sum(), backend="lens")(x), x.sum())


@pytest.mark.parametrize("width", [70, 128])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_row_max_min_keep_nan_in_any_lane_and_in_the_tail(dtype, width, tmp_path):
    # 70 = 4 full vectors of 16 floats (or 8 of 8 doubles) plus a scalar tail; 128: four registers of lanes
    # (two blocks of 64 floats, four of 32 doubles). NaN at a lane position, in the tail or the last
    # register, in the first and last element; a row of -inf; a row of +inf with a NaN; +inf and -inf
    # (their sum is NaN: the exact pass runs and finds none); -inf masks; values whose sum overflows
    x = torch.randn(12, width, dtype=dtype)
    x[1, 5] = x[2, width - 1] = x[3, 0] = x[4, 33] = x[11, 50] = float("nan")
    x[5] = float("-inf")
    x[6] = float("inf")
    x[6, 40] = float("nan")
    x[7, 3], x[7, 19] = float("inf"), float("-inf")
    x[8, ::3] = float("-inf")
    x[9] = torch.finfo(dtype).max
    x[10, :35], x[10, 35:] = torch.finfo(dtype).max, -torch.finfo(dtype).max
    fn = lambda t: (t.amax(-1), t.amin(-1), torch.softmax(t, -1), t.max(-1).values)  # noqa: E731
    from tests.compiler.conftest import compile_with_debug
    out, graph = compile_with_debug(tmp_path, fn, x)
    for got, expected in zip(out, fn(x)):
        torch.testing.assert_close(got, expected, equal_nan=True)
    lanes = 64 // dtype.itemsize * (4 if width == 128 else 1)
    assert f"_lanes[{lanes}];" in (graph / "output_code.py").read_text()
    assert "_sum_all != " in (graph / "output_code.py").read_text()  # the lanes that notice a NaN


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("shape", [(6, 128), (5, 192), (7, 100), (3, 4, 64), (2, 1024)])
def test_row_sums_over_whole_registers_keep_four_registers_of_lanes(dtype, shape, tmp_path):
    x = torch.randn(shape).to(dtype)
    x.view(-1)[3] = float("inf")
    x.view(-1)[-2] = float("nan")
    fn = lambda t: (t.sum(-1), t.mean(-1), t.sum((-2, -1)) if t.dim() == 3 else t.sum(-1) * 2)  # noqa: E731
    from tests.compiler.conftest import compile_with_debug
    out, graph = compile_with_debug(tmp_path, fn, x)
    tol = dict(atol=1e-2, rtol=1e-2) if dtype == torch.bfloat16 else dict(atol=1e-5, rtol=1e-5)
    for got, expected in zip(out, fn(x)):
        torch.testing.assert_close(got, expected, equal_nan=True, **tol)
    code = (graph / "output_code.py").read_text()
    wide = 4 * 64 // (4 if dtype == torch.bfloat16 else dtype.itemsize)  # (bf16 sums in float)
    assert (f"_lanes[{wide}];" in code) == (shape[-1] % wide == 0), wide


@pytest.mark.parametrize("op", ["sum", "amax", "var"])
def test_reduction_loops_a_read_walks_as_one_are_one_loop(tmp_path, op):
    """A per-channel reduction over (N, H, W) of an NCHW tensor runs over N and H*W (49 elements at 7x7, a vector
    loop, instead of 7). (argmax/argmin keep their loops, their result a position in them: test_float_reductions's
    whole-tensor argmin over four dims.)"""
    from tests.compiler.conftest import compile_with_debug
    x = torch.randn(3, 4, 7, 7)
    fn = {"sum": lambda x: x.sum((0, 2, 3)), "amax": lambda x: x.amax((0, 2, 3)),
          "var": lambda x: x.var((0, 2, 3))}[op]
    out, graph = compile_with_debug(tmp_path, fn, x)
    torch.testing.assert_close(out, fn(x), atol=1e-5, rtol=1e-5)
    loops = re.findall(r"for \(int64_t r\w+ = 0; r\w+ < (\d+);", (graph / "output_code.py").read_text())
    assert "49" in loops and "7" not in loops, loops
