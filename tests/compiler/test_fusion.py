"""Scheduler behaviour seen from the generated code: what fuses into one kernel and what does not."""
import json

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from compiler import config
from compiler.decompositions.table import decomposition_table
from compiler import decisions
from compiler.ir.nodes import ComputedBuffer, Constant, ExternCall, GraphIR, InputBuffer, Layout, Load, Op, index_vars
from compiler.lowering import lower_graph
from compiler.scheduler import FusedKernel, _extern_buffers, graph_output_buffers, schedule
from tests.compiler.conftest import compile_with_debug


def compile_and_map(fn, *args, tmp_path):
    out, graph_dir = compile_with_debug(tmp_path, fn, *args)
    return out, json.loads((graph_dir / "kernel_map.json").read_text())


def test_pointwise_chain_is_one_kernel(tmp_path):
    a = [torch.randn(64, 32) for _ in range(4)] + [torch.randn(1, 32)]
    _, kmap = compile_and_map(lambda a0, a1, a2, a3, a4: ((a0 + a1) + a2) * a3 + a4, *a, tmp_path=tmp_path)
    assert [k["kind"] for k in kmap["kernels"]] == ["pointwise"]
    assert kmap["kernels"][0]["name"] == "cpp_fused_add_mul_0"


def test_softmax_is_one_reduction_kernel(tmp_path):
    _, kmap = compile_and_map(lambda x: torch.softmax(x, -1), torch.randn(16, 64), tmp_path=tmp_path)
    assert len(kmap["kernels"]) == 1
    assert kmap["kernels"][0]["kind"] == "reduction"
    assert kmap["kernels"][0]["name"].startswith("cpp_fused__softmax")


def test_matmul_is_an_extern_call_with_fused_epilogue(tmp_path):
    x, w = torch.randn(8, 16), torch.randn(16, 4)
    out, kmap = compile_and_map(lambda x, w: torch.relu(x @ w) * 2, x, w, tmp_path=tmp_path)
    kinds = [k["kind"] for k in kmap["kernels"]]
    assert kinds == ["extern", "pointwise"], kinds
    torch.testing.assert_close(out, torch.relu(x @ w) * 2)


def test_max_fusion_size_bounds_kernels(tmp_path):
    old = config.max_fusion_size
    config.max_fusion_size = 2
    try:
        _, kmap = compile_and_map(lambda x: ((x + 1) * 2 - 3).exp().abs(), torch.randn(8, 8), tmp_path=tmp_path)
    finally:
        config.max_fusion_size = old
    assert len(kmap["kernels"]) >= 2
    assert all(len(k["nodes"]) <= 2 for k in kmap["kernels"])


def test_a_kernels_local_buffers_are_no_graph_output_and_read_by_no_other_step():
    def fn(x, w):
        e = torch.softmax(x, 1)
        return torch.relu(torch.mm(e, w)) + 1, e * 2

    ir = lower_graph(make_fx(fn, decomposition_table())(torch.randn(8, 16), torch.randn(16, 4)))
    sg = schedule(ir, {})
    reads = [{ld.buffer for n in s.nodes for ld in n.reads()} if isinstance(s, FusedKernel)
             else {b for a in list(s.args) + list(s.kwargs.values()) for b in _extern_buffers(a)} for s in sg.steps]
    outputs = graph_output_buffers(ir)
    assert any(k.local for k in sg.kernels) and any(isinstance(s, ExternCall) for s in sg.steps)
    for i, step in enumerate(sg.steps):
        if isinstance(step, FusedKernel):
            assert not step.local & outputs
            assert not any(step.local & reads[j] for j in range(len(sg.steps)) if j != i)



def test_a_node_computed_alone_gets_a_kernel_of_its_own_and_says_why():
    """lowering/graph.py marks a sum of large buffers `alone` (issue 49): neither it nor the next node joins a
    kernel with another node, and each refusal is a why-record; unmarked, the three are one kernel."""
    def node(name: str, reads: str) -> ComputedBuffer:
        xs = index_vars(2)
        body = Op(torch.float32, name, "add", (Load(torch.float32, name, reads, tuple(xs)),
                                              Constant(torch.float32, name, 1.0)))
        return ComputedBuffer(name, torch.float32, Layout((8, 8), (8, 1)), body, xs, [name], name)

    def kernels(alone: bool) -> tuple[list[list[str]], list[list[str]]]:
        nodes = [node("buf0", "arg0"), node("buf1", "buf0"), node("buf2", "buf1")]
        nodes[1].alone = alone
        ir = GraphIR([InputBuffer("arg0", torch.float32, Layout((8, 8), (8, 1)))], nodes, [("buffer", "buf2")])
        decisions.begin()
        try:
            sg = schedule(ir, {})
            refused = [[r.nodes[0], *r.related] for r in decisions._records.get() if r.reason == "alone"]
        finally:
            decisions._records.set(None)
        return [[n.name for n in k.nodes] for k in sg.kernels], refused

    assert kernels(False) == ([["buf0", "buf1", "buf2"]], [])
    assert kernels(True) == ([["buf0"], ["buf1"], ["buf2"]], [["buf1", "buf0"], ["buf2", "buf1"]])
