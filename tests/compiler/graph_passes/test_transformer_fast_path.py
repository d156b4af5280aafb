"""nn.TransformerEncoderLayer's inference fast path (one fused op) compiled as the module's ops
(compiler/graph_passes/transformer_fast_path.py): eager's values and dtype in float32 and under bf16/fp16 autocast, whose products
then run in the half dtype, with norm_first and either activation; a padding mask keeps the fused op."""
import pytest
import torch

from compiler import pipeline

HALF = {"bf16": (torch.bfloat16, 5e-2, 2e-2), "fp16": (torch.float16, 1e-2, 1e-2)}


def _layer(norm_first: bool, activation: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True, norm_first=norm_first,
                                            activation=activation).eval()


def _compiled_graph_code(run, *args):
    torch._dynamo.reset()
    mark = len(pipeline.COMPILED)
    with torch.no_grad():
        out = torch.compile(run, backend="lens")(*args)
    graph, = pipeline.COMPILED[mark:]
    return out, graph.gm.code


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_the_fused_encoder_layer_compiles_as_its_ops_with_eagers_values_and_dtype(norm_first, activation, precision):
    layer, x = _layer(norm_first, activation), torch.randn(2, 16, 64)
    dtype, atol, rtol = HALF.get(precision, (None, 1e-5, 1e-5))

    def run(x):
        with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            return layer(x)
    with torch.no_grad():
        expected = run(x)
    got, code = _compiled_graph_code(run, x)
    assert "_transformer_encoder_layer_fwd" not in code
    assert got.dtype == expected.dtype  # the fused op returns autocast's dtype
    torch.testing.assert_close(got, expected, atol=atol, rtol=rtol)
    if dtype is not None:  # the products in the half dtype (autocast's casts traced with them)
        assert f"dtype = {dtype}" in code


def test_a_padding_mask_keeps_the_fused_op_and_eagers_result():
    layer, x = _layer(False, "relu"), torch.randn(2, 16, 64)
    mask = torch.zeros(2, 16, dtype=torch.bool)
    mask[1, 12:] = True

    def run(x, mask):
        return layer(x, src_key_padding_mask=mask)
    with torch.no_grad():
        expected = run(x, mask)
    got, code = _compiled_graph_code(run, x, mask)
    assert "_transformer_encoder_layer_fwd" in code
    torch.testing.assert_close(got.to_padded_tensor(0.0) if got.is_nested else got,
                               expected.to_padded_tensor(0.0) if expected.is_nested else expected)
