"""Parser tests on format variants across torch versions: Triton kernels, older `# Source Nodes:` comments,
provenance keys without handles, `# File:` comments without ` in fn`, unknown major versions."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from lens_foo1_fixture import KERNEL, KERNEL_END, KERNEL_MAX_LINE, code_line
from lsp_workspaces import LENS_FOO1, OK_RUN

from lens_format.kernel_map import read_kernel_map
from lsp_server.loading.run_loader import load_run
from lsp_server.parsers import UnsupportedVersionError
from lsp_server.parsers.fx_graph_readable import parse_fx_graph_readable_text
from lsp_server.parsers.ir_post_fusion import parse_ir_post_fusion_text
from lsp_server.parsers.output_code import CodeLoop, cpp_loops, parse_output_code_text
from lsp_server.parsers.provenance import parse_provenance

TRITON_OUTPUT_CODE = """\
# kernel path: /tmp/torchinductor_root/ab/cabc.py
# Topologically Sorted Source Nodes: [x, x_1], Original ATen: [aten.addmm, aten.relu]
# Source node to ATen node mapping:
#   x => add_tensor_1
triton_poi_fused_addmm_relu_0 = async_compile.triton('triton_poi_fused_addmm_relu_0', '''
import triton
@triton.jit
def triton_poi_fused_addmm_relu_0(in_out_ptr0, xnumel, XBLOCK : tl.constexpr):
    tmp0 = tl.load(in_out_ptr0 + x0)
''', device_str='cuda')

def call(args):
    # Source Nodes: [x], Original ATen: [aten.mm]
    extern_kernels.mm(arg0_1, arg1_1, out=buf0)
    # Topologically Sorted Source Nodes: [x, x_1], Original ATen: [aten.addmm, aten.relu]
    # [Provenance debug handles] triton_poi_fused_addmm_relu_0:2
    stream0 = get_raw_stream(0)
    triton_poi_fused_addmm_relu_0.run(buf0, 512, stream=stream0)
"""


def test_output_code_triton_kernel_and_launches() -> None:
    parsed = parse_output_code_text(Path("output_code.py"), TRITON_OUTPUT_CODE)
    [kernel] = parsed.kernels
    assert (kernel.name, kernel.flavor, kernel.start_line, kernel.end_line) == ("triton_poi_fused_addmm_relu_0", "triton", 5, 10)
    assert kernel.source_nodes == ["x", "x_1"] and kernel.original_aten == ["aten.addmm", "aten.relu"]
    assert [(l.callee, l.line, l.handle, l.source_nodes) for l in parsed.launches] == [
        ("extern_kernels.mm", 14, None, ["x"]),
        ("triton_poi_fused_addmm_relu_0", 18, 2, ["x", "x_1"]),  # after `stream0 = ...`
    ]


def test_output_code_fx_line_marks_annotate_the_next_statement() -> None:
    text = "k = async_compile.cpp_pybinding([], r'''\n{\n    // Corresponding FX code line: 4\n\n    auto t = -x;\n}\n''')\n"
    [kernel] = parse_output_code_text(Path("output_code.py"), text).kernels
    assert [(m.comment_line, m.statement_line, m.fx_line) for m in kernel.fx_marks] == [(3, 5, 4)]


def test_output_code_unterminated_kernel_ends_at_end_of_file() -> None:
    [kernel] = parse_output_code_text(Path("o.py"), "k = async_compile.cpp_pybinding([], r'''\nint x;\n").kernels
    assert (kernel.start_line, kernel.end_line) == (1, 2)


# ours (`for (`, `{` on the next line), real Inductor's (`for(`), a one-line loop, an unbraced one, and a kernel whose
# size variant is a closed function before it (the loops of `v0` hold none of the kernel's own lines)
CPP_LOOPS = """\
void k_v0(long n)
{
    for (long x0 = 0; x0 < 4; x0++)
    {
        out[x0] = 1;
    }
}
void k(long n)
{
    if (n == 4) k_v0(n);
    #pragma omp parallel for
    for(long x0=0; x0<n; x0++)
    {
        {
            for (int i = 0; i < 3; i++) { acc += i; }
            for (int j = 0; j < 3; j++)
                acc += j;
            out[x0] = acc;
        }
    }
}
"""


def test_cpp_loops_match_each_for_to_its_braces() -> None:
    lines = CPP_LOOPS.splitlines()
    assert cpp_loops(lines, 1, len(lines)) == [CodeLoop(3, 4, 6), CodeLoop(15, 15, 15), CodeLoop(12, 13, 20)]
    assert cpp_loops(lines, 8, len(lines)) == [CodeLoop(15, 15, 15), CodeLoop(12, 13, 20)]  # the kernel `k` alone


def test_the_index_keeps_a_kernels_loops_around_its_lines() -> None:
    run = load_run(LENS_FOO1 / "runs" / OK_RUN)
    [kernel] = [k for g in run.graphs for k in g.kernels if k.name == KERNEL]
    header = code_line("for (int64_t x1 = 0; x1 < 32; x1++)") + 1
    assert kernel.loops_around(KERNEL_MAX_LINE + 1) == [header]  # hover's "not vectorized" looks there too
    assert kernel.loops_around(header) == [] and kernel.loops_around(KERNEL_END + 1) == []


def test_readable_frames_old_format_and_nodes_without_source() -> None:
    text = """class GraphModule(torch.nn.Module):
    def forward(self, arg0_1: f32[8]):
        # File: /a/m.py:10, code: y = x + 1
        add: f32[8] = torch.ops.aten.add.Tensor(arg0_1, 1);  arg0_1 = None

        something the parser has never seen
        full: "f32[8]" = torch.ops.aten.full.default([8], 0)
        return (add, full)
"""
    graph = parse_fx_graph_readable_text(Path("fx_graph_readable.py"), text)
    assert [(n.name, n.target, n.line) for n in graph.nodes] == [("add", "aten.add.Tensor", 4), ("full", "aten.full.default", 7)]
    assert graph.nodes[0].source.file == "/a/m.py" and graph.nodes[0].source.line == 10
    assert graph.nodes[0].source.function == "" and graph.nodes[1].source is None
    assert graph.forward_line == 2


def test_provenance_with_and_without_handles(tmp_path: Path) -> None:
    path = tmp_path / "inductor_provenance_tracking_node_mappings.json"
    path.write_text(json.dumps({"cppCodeToPost": {"cpp_fused_a_0:3": ["a"], "cpp_fused_b_1": ["b"]},
                                "postToPre": {"a": ["x"]}}))
    parsed = parse_provenance(path)
    assert [(k.kernel, k.handle, k.nodes) for k in parsed.kernels] == [("cpp_fused_a_0", 3, ["a"]), ("cpp_fused_b_1", None, ["b"])]
    assert parsed.nodes_of("cpp_fused_b_1") == ["b"] and parsed.post_to_pre == {"a": ["x"]}


def test_kernel_map_rejects_unknown_major_version(tmp_path: Path) -> None:
    path = tmp_path / "kernel_map.json"
    path.write_text(json.dumps({"version": 2, "nodes": [], "kernels": []}))
    with pytest.raises(UnsupportedVersionError, match="unsupported version 2"):
        read_kernel_map(path)
    path.write_text(json.dumps({"version": "1.3", "graph_id": "g", "nodes": [{"name": "n"}, 5],
                                "kernels": [{"name": "k", "output_code_lines": [3, "x"]}]}))
    parsed = read_kernel_map(path)
    assert [n.name for n in parsed.nodes] == ["n"] and parsed.kernels[0].start_line == 3 and parsed.kernels[0].end_line is None


def test_ir_post_fusion_folds_fused_parts_and_reads_extern_kernels() -> None:
    text = """op0: ExternKernelSchedulerNode(ExternKernelOut)
op0.writes = [StarDep(name='buf0', mode=None)]
op0.node.kernel = extern_kernels.mm
op1_op2: OuterLoopFusedSchedulerNode(SchedulerNode,SchedulerNode)
op1_op2.writes = [MemoryDep('buf1', c0, {c0: 16}), MemoryDep('buf2', c0, {c0: 16})]
op1: SchedulerNode(ComputedBuffer)
        relu = ops.relu(load)
op2: SchedulerNode(ComputedBuffer)
        mul = ops.mul(load, constant)
"""
    graph = parse_ir_post_fusion_text(Path("ir_post_fusion.txt"), text)
    assert [(n.name, n.writes, n.body_ops, n.extern_kernel) for n in graph.nodes] == [
        ("op0", ["buf0"], [], "extern_kernels.mm"), ("op1_op2", ["buf1", "buf2"], ["relu", "mul"], None)]
