"""An addmm whose users all lower into kernels runs as mm, its bias added by those kernels
(compiler/lowering/addmm_bias.py: bias_in_consumers); results stay eager's."""
import re

import pytest
import torch

from compiler import config
from tests.compiler.conftest import assert_same, compile_with_debug


def products(code: str) -> list[str]:
    """The 2-D products the generated code calls, through gemm.py's helper or ATen's out= op directly."""
    return re.findall(r"\b(?:gemm|torch)\.(mm|addmm)\(", code)


def code_of(tmp_path, fn, *args, atol=1e-5, rtol=1e-5) -> str:
    out, graph = compile_with_debug(tmp_path, fn, *args)
    torch.testing.assert_close(out, fn(*args), atol=atol, rtol=rtol)
    return (graph / "output_code.py").read_text()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_linear_then_activation_adds_the_bias_in_the_activation_kernel(tmp_path, dtype):
    lin = torch.nn.Linear(64, 96).to(dtype)
    x = torch.randn(40, 64, dtype=dtype)
    with torch.no_grad():
        code = code_of(tmp_path, lambda x: torch.relu(lin(x)), x)
        assert products(code) == ["mm"]
        assert "addmm's bias is added in the kernels that read the product" in code
        kernel = code[code.index('extern "C" void cpp_fused_addmm_relu'):]
        assert re.search(r"in_ptr\d+\[x1\]", kernel)  # a row of bias, read in the relu's kernel
        code = code_of(tmp_path, lambda x: torch.nn.functional.gelu(lin(x)) * 2 + lin(x).sum(-1, keepdim=True), x)
        assert "addmm" not in products(code)


def test_encoder_layer_adds_every_linear_bias_in_its_kernels(tmp_path):
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        enc = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True).eval()
        with torch.no_grad():
            code = code_of(tmp_path, enc, torch.randn(2, 16, 64), atol=1e-5, rtol=1e-4)
    finally:
        torch.backends.mha.set_fastpath_enabled(True)
    assert products(code) == ["mm"] * 4


def test_addmm_stays_whole_where_nothing_would_add_the_bias_for_free(tmp_path, monkeypatch):
    lin = torch.nn.Linear(64, 96)
    x = torch.randn(40, 64)
    with torch.no_grad():
        assert "addmm" in products(code_of(tmp_path, lin, x))  # the product is the graph's output
        assert "addmm" in products(code_of(tmp_path, lambda x: lin(x) @ torch.ones(96, 8), x))  # read by an mm
        b, m1, m2 = torch.randn(96), torch.randn(40, 64), torch.randn(64, 96)
        assert "addmm" in products(code_of(tmp_path, lambda b, a, w: torch.addmm(b, a, w, beta=0.5).relu(),
                                           b, m1, m2))
        assert "addmm" in products(code_of(tmp_path, lambda b, a, w: torch.addmm(b, a, w).relu(),
                                           torch.randn(40, 96), m1, m2))  # a full bias matrix
        monkeypatch.setattr(config, "unfuse_addmm_bias", False)
        assert "addmm" in products(code_of(tmp_path, lambda x: torch.relu(lin(x)), x))


def test_gradients_through_an_unfused_linear_match_eager():
    lin = torch.nn.Linear(32, 48)
    x = torch.randn(16, 32, requires_grad=True)
    fn = lambda x: torch.tanh(lin(x)).sum()  # noqa: E731
    fn(x).backward()
    expected = x.grad.clone(), lin.weight.grad.clone(), lin.bias.grad.clone()
    x.grad = lin.weight.grad = lin.bias.grad = None
    assert_same(fn, x).backward()
    for got, want in zip((x.grad, lin.weight.grad, lin.bias.grad), expected):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
