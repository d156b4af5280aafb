"""why.json: each decision a stage reports is written for the graph, on the node it concerns, with its kernel."""
import json
import re

import torch

from compiler import config
from tests.compiler.conftest import compile_with_debug


def _records(folder) -> list[dict]:
    data = json.loads((folder / "why.json").read_text())
    assert data["version"] == 1 and data["graph_id"] == folder.name
    return data["records"]


def _chain(x, y):
    a = torch.neg(x)
    b = a * 2 + 1
    c = b.amax(dim=1, keepdim=True)
    return torch.mm(b - c, y), x.argmax(dim=1)


def test_aten_call_fusion_refusals_and_scalar_reductions(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "max_fusion_size", 2)
    _, folder = compile_with_debug(tmp_path, _chain, torch.randn(8, 16), torch.randn(16, 4))
    records = _records(folder)
    kernels = {k["name"]: k for k in json.loads((folder / "kernel_map.json").read_text())["kernels"]}
    by_kind = {}
    for r in records:
        by_kind.setdefault(r["kind"], []).append(r)
        assert r["kernel"] in kernels and r["nodes"][0] in kernels[r["kernel"]]["nodes"]
    (mm,) = by_kind["aten_call"]
    assert mm["nodes"] == ["mm"] and mm["reason"] == "gemm" and "ATen's GEMM" in mm["message"]
    refused = [r for r in by_kind["not_fused"] if r["reason"] == "max_fusion_size"]
    assert refused and all(r["fix"] == {"title": "Set compiler.config.max_fusion_size = 4",
                                        "setting": "max_fusion_size", "value": 4} for r in refused)
    assert "over compiler.config.max_fusion_size = 2" in refused[0]["message"] and refused[0]["related"]
    scalar = {r["nodes"][0]: r for r in by_kind["not_vectorized"]}
    assert scalar["argmax"]["reason"] == "no_simd_reduction" and "first index" in scalar["argmax"]["message"]
    assert "NaN propagation" in scalar["amax"]["message"]


def _aten_calls(folder) -> list[tuple[str, list[str], str]]:
    return [(r["reason"], r["nodes"], r["message"]) for r in _records(folder) if r["kind"] == "aten_call"]


def test_an_op_without_a_lowering_says_no_lowering(tmp_path):
    x = torch.randn(8, 8)
    out, folder = compile_with_debug(tmp_path, lambda x: torch.cumsum(x, 0) * 2, x)
    torch.testing.assert_close(out, torch.cumsum(x, 0) * 2)
    assert _aten_calls(folder) == [("no_lowering", ["cumsum"], "runs as an ATen call (aten.cumsum.default): the "
                                                              "compiler has no lowering for this op")]


def test_a_dtype_without_generated_code_says_dtype(tmp_path):
    x = torch.randn(8, 8, dtype=torch.complex64)
    out, folder = compile_with_debug(tmp_path, lambda x: x * x, x)
    torch.testing.assert_close(out, x * x)
    assert _aten_calls(folder) == [("dtype", ["mul"], "runs as an ATen call (aten.mul.Tensor): lowering of "
                                   "aten.mul.Tensor failed: UnsupportedLowering: dtype complex64 has no generated code")]


def test_a_symbolic_size_the_lowering_cannot_take_says_dynamic_size(tmp_path):
    x = torch.randn(8, 6)
    torch._dynamo.mark_dynamic(x, 0)
    out, folder = compile_with_debug(tmp_path, lambda x: torch.var(x, dim=0, correction=0.5) * 2, x)
    torch.testing.assert_close(out, torch.var(x, dim=0, correction=0.5) * 2)
    ((reason, nodes, message),) = _aten_calls(folder)
    assert (reason, nodes) == ("dynamic_size", ["var"])
    assert message.startswith("runs as an ATen call (prims.var.default): lowering of prims.var.default failed: "
                              "UnsupportedLowering: var over a symbolic count s"), message
    assert message.endswith(" with correction 0.5"), message


def test_a_data_dependent_size_says_dynamic_size(tmp_path):
    x = torch.tensor([[0.0, 1.0], [2.0, 0.0]])
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):  # (else nonzero breaks the graph)
        out, folder = compile_with_debug(tmp_path, lambda x: torch.nonzero(x) * 2, x)
    assert torch.equal(out, torch.nonzero(x) * 2)
    ((reason, nodes, message),) = _aten_calls(folder)
    assert (reason, nodes) == ("dynamic_size", ["nonzero"])
    assert re.fullmatch(r"runs as an ATen call \(aten\.nonzero\.default\): its size u\d+ is data-dependent",
                        message), message


def _not_fused(folder) -> list[tuple[str, list[str], list[str], str]]:
    return [(r["reason"], r["nodes"], r.get("related", []), r["message"]) for r in _records(folder)
            if r["kind"] == "not_fused"]


def _two_shapes(x):
    s = x.sum(dim=1, keepdim=True)
    return torch.relu(x).t().contiguous() + s.t()


def test_a_consumer_whose_loops_share_no_outer_loop_says_loop_shape(tmp_path):
    _, folder = compile_with_debug(tmp_path, _two_shapes, torch.randn(32, 64))
    assert _not_fused(folder) == [("loop_shape", ["add", "relu"], ["sum_1"], "did not join `sum_1`'s kernel: its "
                                   "loops (64×32) share no outer loop with the kernel's (32)")]
    assert all(r["fix"] is None for r in _records(folder) if r["kind"] == "not_fused")


def _column_sums(x):
    a = torch.exp(x)  # (two users of an exp: a buffer the sum reads)
    return a * 2, a.sum(0)


def test_a_consumer_reading_another_outer_iteration_says_other_iteration(tmp_path):
    """The column sum's outer loop is over columns, the exp kernel's over rows of the same length: the loops line
    up, but the sum reads every row of `exp` in each of its iterations."""
    _, folder = compile_with_debug(tmp_path, _column_sums, torch.randn(32, 32))
    assert _not_fused(folder) == [("other_iteration", ["sum_1"], ["exp"], "did not join `exp`'s kernel: it reads "
                                   "`exp` at another iteration of the kernel's outer loop")]
    assert all(r["fix"] is None for r in _records(folder) if r["kind"] == "not_fused")


def test_a_graph_that_runs_eagerly_has_one_record(tmp_path, monkeypatch):
    from compiler import pipeline
    from compiler.lowering import EagerGraph

    def refuse(gm):
        raise EagerGraph("node arg0_1 has symbolic sizes")
    monkeypatch.setattr(pipeline, "lower_graph", refuse)
    _, folder = compile_with_debug(tmp_path, lambda x: torch.relu(x) * 2, torch.randn(16, 16))
    (record,) = _records(folder)
    assert record["kind"] == "eager_graph" and record["reason"] == "eager_dynamic_shapes"
    assert record["message"].endswith("runs eagerly (no generated code): node arg0_1 has symbolic sizes")


def test_a_plain_graph_has_no_records(tmp_path):
    _, folder = compile_with_debug(tmp_path, lambda x: torch.relu(x) * 2, torch.randn(16, 16))
    assert _records(folder) == []
