"""why.json: each decision a stage reports is written for the graph, on the node it concerns, with its kernel."""
import json

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


def _two_shapes(x):
    s = x.sum(dim=1, keepdim=True)
    return torch.relu(x).t().contiguous() + s.t()


def test_a_consumer_of_another_loop_shape_or_iteration_says_so(tmp_path):
    _, folder = compile_with_debug(tmp_path, _two_shapes, torch.randn(32, 64))
    reasons = {r["reason"] for r in _records(folder) if r["kind"] == "not_fused"}
    assert reasons & {"loop_shape", "other_iteration"}, reasons
    assert all(r["fix"] is None for r in _records(folder) if r["kind"] == "not_fused")


def test_a_graph_that_runs_eagerly_has_one_record(tmp_path, monkeypatch):
    from compiler import frontend
    from compiler.lowering import EagerGraph

    def refuse(gm):
        raise EagerGraph("node arg0_1 has symbolic sizes")
    monkeypatch.setattr(frontend, "lower_graph", refuse)
    _, folder = compile_with_debug(tmp_path, lambda x: torch.relu(x) * 2, torch.randn(16, 16))
    (record,) = _records(folder)
    assert record["kind"] == "eager_graph" and record["reason"] == "eager_dynamic_shapes"
    assert record["message"].endswith("runs eagerly (no generated code): node arg0_1 has symbolic sizes")


def test_a_plain_graph_has_no_records(tmp_path):
    _, folder = compile_with_debug(tmp_path, lambda x: torch.relu(x) * 2, torch.randn(16, 16))
    assert _records(folder) == []
