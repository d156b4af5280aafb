"""Ops whose eager CPU kernel computes in its own order (compiler/decompositions/table.py, lowering/pointwise.py): addcmul's
contracted multiply-add, layer_norm's x * rstd - rstd * mean, soft_margin_loss
op by op in float16. Each is compared with eager on several shapes, in float32 and the half dtypes."""
import pytest
import torch
import torch.nn.functional as F

from compiler import config
from tests.compiler.test_half_precision import _compiled, _generated

HALF = [torch.bfloat16, torch.float16]
SHAPES = [(33, 17), (64, 1024), (5, 3, 64), (4096,)]


def _randn(shape, dtype, seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, *HALF], ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("value", [1, 0.3])
def test_addcmul_is_eagers_fused_multiply_add(dtype, shape, value, tmp_path):
    """eager: fma(value * t1, t2, self), one rounding (its kernels are built with -mfma); self + value * t1 * t2
    rounds the product first (about a quarter of float32 results an ulp off), unless g++ contracts it as well."""
    x, a, b = (_randn(shape, dtype, seed) for seed in range(3))
    fn = lambda x, a, b: torch.addcmul(x, a, b, value=value)  # noqa: E731
    out, kernels, _ = _compiled(tmp_path, fn, x, a, b)
    assert torch.equal(out, fn(x, a, b))
    _generated(kernels)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_addcdiv_with_a_value_is_dynamos_rewrite(dtype, tmp_path, monkeypatch):
    """torch.addcdiv(..., value=v) reaches every backend as div, mul, add (Dynamo's handle_addcdiv): with each half
    op rounded (emulate_precision_casts) lens computes what aot_eager computes, whatever eager's kernel gives (the
    OpInfo half sweep's addcdiv samples with a value differ from eager for every backend, not for lens alone)."""
    monkeypatch.setattr(config, "emulate_precision_casts", True)
    x, a, b = (_randn((5, 5, 5), dtype, seed) for seed in range(3))
    fn = lambda x, a, b: torch.addcdiv(x, a, b, value=3.14)  # noqa: E731
    out, _, _ = _compiled(tmp_path, fn, x, a, b)
    torch._dynamo.reset()
    assert torch.equal(out, torch.compile(fn, backend="aot_eager")(x, a, b))


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("shape", [(64, 1), (7, 3, 1), (48, 40), (8, 1024)], ids=str)
@pytest.mark.parametrize("affine", [False, True])
def test_layer_norm_of_rows_at_their_mean_is_eagers(dtype, shape, affine, tmp_path):
    """ATen's half kernel computes x * rstd + (-rstd * mean) with an fma: where x equals its row's mean (rows of
    one element, constant rows) the result is that product's rounding error, not (x - mean) * rstd = 0."""
    x = _randn(shape, dtype, 0, 3.0)
    x[: shape[0] // 2] = x[: shape[0] // 2, ..., :1]  # constant rows
    n = shape[-1]
    w, b = (_randn((n,), dtype, 1), _randn((n,), dtype, 2, 1e-3)) if affine else (None, None)
    fn = lambda x: torch.ops.aten.native_layer_norm(x, (n,), w, b, 1e-5)  # noqa: E731
    out, kernels, _ = _compiled(tmp_path, fn, x)
    for got, expected in zip(out, fn(x), strict=True):
        assert got.dtype == expected.dtype and got.shape == expected.shape
        torch.testing.assert_close(got, expected)
    _generated(kernels)


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("shape", [(20,), (5, 7), (64, 33)], ids=str)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_soft_margin_loss_overflows_where_eager_does(dtype, shape, reduction, tmp_path, monkeypatch):
    """Eager computes neg, mul_, exp_, log1p_ in the tensor's dtype: exp(12) is inf in float16, so is the loss;
    with each half op rounded (emulate_precision_casts) lens gives the same, not torch's float32 decomposition."""
    monkeypatch.setattr(config, "emulate_precision_casts", True)
    x = _randn(shape, dtype, 0, 6.0)
    target = torch.where(_randn(shape, torch.float32, 1) > 0, 1.0, -1.0).to(dtype)
    fn = lambda x, t: F.soft_margin_loss(x, t, reduction=reduction)  # noqa: E731
    out, kernels, _ = _compiled(tmp_path, fn, x, target)
    torch.testing.assert_close(out, fn(x, target), equal_nan=True)
    _generated(kernels)


# (input spatial sizes, output sizes or scale factors, align_corners): upsampling and downsampling, sizes unchanged
# along one dimension (ATen copies), explicit scale factors
INTERPOLATIONS = {
    "linear": [((7,), (12,), False), ((9,), (4,), True), ((5,), 1.7, False), ((6,), (6,), False)],
    "trilinear": [((3, 4, 5), (6, 3, 9), False), ((4, 2, 6), (5, 7, 4), True), ((3, 3, 4), 1.6, False)],
    "bicubic": [((5, 6), (9, 11), False), ((6, 4), (4, 10), True), ((4, 5), 2.0, False)],
}


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("mode,case", [(m, c) for m, cases in INTERPOLATIONS.items() for c in cases], ids=str)
def test_interpolate_weights_are_rounded_to_the_dtype(dtype, mode, case, tmp_path, monkeypatch):
    """ATen's CPU kernel stores each output index's interpolation weights in the tensor's dtype and sums the taps
    in float (one fma a tap); torch's decomposition keeps the weights in float: up to several ulps off in bfloat16."""
    monkeypatch.setattr(config, "emulate_precision_casts", True)
    spatial, size, align_corners = case
    x = _randn((2, 3, *spatial), dtype, 0, 2.0)
    kw = {"scale_factor": size, "recompute_scale_factor": False} if isinstance(size, float) else {"size": size}
    fn = lambda x: F.interpolate(x, mode=mode, align_corners=align_corners, **kw)  # noqa: E731
    out, kernels, _ = _compiled(tmp_path, fn, x)
    expected = fn(x)
    assert out.dtype == expected.dtype and out.shape == expected.shape
    if mode == "bicubic" and dtype == torch.float16:  # (the kernel's float arithmetic is not all reproduced)
        torch.testing.assert_close(out, expected)
    else:
        assert torch.equal(out, expected), (out.float() - expected.float()).abs().max()


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("shape,dim", [((5, 5), 1), ((10, 5, 5), -1), ((64, 33), 1), ((3, 300), -1), ((10, 5, 5), 1)],
                         ids=str)
def test_log_softmax_rounds_its_row_sums_as_eager_does(dtype, shape, dim, tmp_path, monkeypatch):
    """ATen's last-dimension kernel keeps each row's sum(exp(x - max)) and its log in the tensor's dtype before
    x - max - log_sum (in float); torch's decomposition keeps both in float (a row's maximum gives -log_sum, not 0).
    Other dimensions: their kernel keeps both in float, as the decomposition does."""
    monkeypatch.setattr(config, "emulate_precision_casts", True)
    x = _randn(shape, dtype, 0, 3.0)
    fn = lambda x: torch.log_softmax(x, dim)  # noqa: E731
    out, kernels, _ = _compiled(tmp_path, fn, x)
    expected = fn(x)
    assert out.dtype == expected.dtype and torch.equal(out, expected), (out.float() - expected.float()).abs().max()
    _generated(kernels)


# float16 on small shapes only: on (64, 33) and (4096,) a few float16 results differ because the generated code's
# float log (libmvec) is 1 ulp off the correctly rounded one where eager's is not, not because of the rounding order
LOGIT_CASES = [(torch.bfloat16, (5, 5, 5)), (torch.bfloat16, (64, 33)), (torch.bfloat16, (4096,)),
               (torch.float16, (5, 5, 5)), (torch.float16, (7, 9))]


@pytest.mark.parametrize("dtype,shape", LOGIT_CASES, ids=str)
@pytest.mark.parametrize("eps", [None, 0.2, 1e-6, -1.0])
def test_logit_rounds_each_step_as_eager_does(dtype, shape, eps, tmp_path, monkeypatch):
    """ATen's half kernel clamps to [eps, 1 - eps] in the tensor's dtype and rounds 1 - x, x / (1 - x) and the log
    each to it; torch's decomposition computes them in float (a bfloat16 result an ulp or more off)."""
    monkeypatch.setattr(config, "emulate_precision_casts", True)
    g = torch.Generator().manual_seed(0)
    x = torch.rand(shape, generator=g).to(dtype)
    fn = lambda x: torch.logit(x, eps)  # noqa: E731
    out, kernels, _ = _compiled(tmp_path, fn, x)
    expected = fn(x)
    assert out.dtype == expected.dtype and torch.equal(out, expected), (out.float() - expected.float()).abs().max()
    _generated(kernels)


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("shape", [(5,), (5, 5), (64, 33), (4096,)], ids=str)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_mse_loss_squares_the_rounded_difference(dtype, shape, reduction, tmp_path, monkeypatch):
    """Eager rounds x - target to the dtype before squaring (and the square before reducing); torch's decomposition
    squares the float difference: float16 results an ulp off."""
    monkeypatch.setattr(config, "emulate_precision_casts", True)
    x, t = _randn(shape, dtype, 0, 4.0), _randn(shape, dtype, 1, 4.0)
    fn = lambda x, t: F.mse_loss(x, t, reduction=reduction)  # noqa: E731
    out, kernels, _ = _compiled(tmp_path, fn, x, t)
    expected = fn(x, t)
    assert out.dtype == expected.dtype and torch.equal(out, expected), (out.float() - expected.float()).abs().max()
    _generated(kernels)


@pytest.mark.parametrize("dtype", [torch.float32, *HALF], ids=str)
@pytest.mark.parametrize("shape,dim", [((5, 5, 5), -1), ((4, 6, 3), -2), ((7, 5), -1), ((5, 5, 5), 2)], ids=str)
def test_unique_consecutive_over_a_negative_dim_has_eagers_shape(dtype, shape, dim, tmp_path):
    """torch's fake kernel slices the shape with a negative dim (a (5, 5, 5) input's dim=-1 result claimed
    (5, 5, u0, 5, 5, 5)); the decomposition passes dim + ndim."""
    x = (_randn(shape, torch.float32, 0) > 0).to(dtype)  # runs of equal slices to merge
    fn = lambda x: torch.unique_consecutive(x, return_inverse=True, return_counts=True, dim=dim)  # noqa: E731
    torch._dynamo.reset()
    out = torch.compile(fn, backend="lens", fullgraph=True)(x)
    for got, expected in zip(out, fn(x), strict=True):
        assert got.dtype == expected.dtype and got.shape == expected.shape and torch.equal(got, expected)


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("shape,dim,keepdim", [((12,), [0], False), ((5, 7), [1], True), ((6, 40), [0], False),
                                               ((3, 4, 5), [0, 2], False)], ids=str)
def test_logsumexp_rounds_each_step_as_eager_does(dtype, shape, dim, keepdim, tmp_path, monkeypatch):
    """ATen's logsumexp is x - max, exp, sum, log and + max one after another in the tensor's dtype; torch's
    decomposition keeps all in float (OpInfo's masked.logsumexp: -0.1768 against eager's -0.1738 in bfloat16, a
    masked-out element being -inf). Compared with eager on values whose steps round, a -inf among them."""
    monkeypatch.setattr(config, "emulate_precision_casts", True)
    x = _randn(shape, dtype, 3, 4.0)
    x.view(-1)[1] = float("-inf")
    fn = lambda x: torch.logsumexp(x, dim, keepdim=keepdim)  # noqa: E731
    out, kernels, _ = _compiled(tmp_path, fn, x)
    expected = fn(x)
    assert out.dtype == expected.dtype and torch.equal(out, expected), (out.float() - expected.float()).abs().max()
    _generated(kernels)
    bf = torch.bfloat16  # the OpInfo sample
    sample = torch.tensor([-8.5, -1.765625, -4.3125, -2.40625, -float("inf"), -float("inf"), -8.0625, -0.57421875])
    if dtype == bf:
        got, _, _ = _compiled(tmp_path / "sample", lambda t: torch.logsumexp(t, 0), sample.to(bf))
        assert got.item() == torch.logsumexp(sample.to(bf), 0).item() == -0.173828125


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_nll_loss_over_images_is_eagers_kernel(dtype, reduction, tmp_path):
    """nll_loss of (N, C, H, W) is ATen's nll_loss2d, whose half kernel keeps its cascade sum's partial sums in the
    dtype (OpInfo's sample: 0.4844 in bfloat16 where the float sum gives 0.4688): an extern call of that kernel,
    equal to eager; float32 is decomposed and generated (the target's gather an extern call)."""
    x = _randn((2, 5, 7, 9), dtype, 4, 3.0)
    target = torch.randint(0, 5, (2, 7, 9), generator=torch.Generator().manual_seed(5))
    fn = lambda x, t: F.nll_loss(x, t, reduction=reduction)  # noqa: E731
    out, kernels, _ = _compiled(tmp_path, fn, x, target)
    assert torch.equal(out, fn(x, target))
    assert [k["name"].endswith("_nll_loss2d_forward") for k in kernels if k["kind"] == "extern"] == [True]
    out, kernels, _ = _compiled(tmp_path / "float", fn, x.float(), target)
    torch.testing.assert_close(out, fn(x.float(), target))
    _generated(kernels, externs=("gather",))
