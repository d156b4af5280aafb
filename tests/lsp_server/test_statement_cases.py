"""Every statement case of benchmarks/statement_map_bench.py is mapped by the index to exactly its node: not a
neighbour, not "one of". tests/fixtures/inductor_statements: real Inductor CPU (C++) runs; inductor_statements_triton:
real Inductor GPU (Triton) runs on an H100 (torch 2.11). Each statement's node was found by swapping that node's op
and seeing which statements change."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lsp_server.loading.graph_builder import build_graph
from lsp_server.model import Graph

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CPP = FIXTURES / "inductor_statements"
TRITON = FIXTURES / "inductor_statements_triton"
CASES = json.loads((CPP / "cases.json").read_text())
TRITON_CASES = json.loads((TRITON / "cases.json").read_text())
# Triton statements not answered by their node alone: none since an extern call's buffer holds the nodes its own
# provenance entry names (GPT-2's last bias add reads an `extern_kernels.mm` whose provenance names the post-grad
# `mm_default`, once taken from a source-node comment that made `add_11` tie with `add_tensor`).
TRITON_MISSES: dict[tuple[str, int], list[str]] = {}


def mapped_lines(folder: Path) -> tuple[Graph, dict[int, list[str]]]:
    graph = Graph(folder.name, folder, "fixture")
    build_graph(graph)
    assert not graph.problems
    return graph, {line.line: line.nodes for kernel in graph.kernels if kernel.language != "python"
                   for line in kernel.lines}


@pytest.mark.parametrize("program", sorted(CASES))
def test_each_statement_maps_to_the_node_whose_swap_changes_it(program: str):
    graph, mapped = mapped_lines(CPP / program)
    code = graph.output_code_lines
    cases = CASES[program]
    assert cases
    for case in cases:
        assert code[case["line"] - 1].strip() == case["text"]
        assert mapped.get(case["line"]) == [case["node"]], case


@pytest.mark.parametrize("program", sorted(TRITON_CASES))
def test_each_triton_statement_maps_to_the_node_whose_swap_changes_it(program: str):
    graph, mapped = mapped_lines(TRITON / program)
    assert {k.language for k in graph.kernels if k.language != "python"} == {"triton"}
    code = graph.output_code_lines
    cases = TRITON_CASES[program]
    assert cases
    for case in cases:
        assert code[case["line"] - 1].strip() == case["text"]
        expected = TRITON_MISSES.get((program, case["line"]), [case["node"]])
        assert mapped.get(case["line"]) == expected, case


def test_the_triton_shares_are_the_measured_ones():
    """183 cases: every one mapped, every one to exactly its node."""
    total = right = mapped = 0
    for program, cases in TRITON_CASES.items():
        _, answers = mapped_lines(TRITON / program)
        for case in cases:
            answer = answers.get(case["line"], [])
            total, mapped, right = total + 1, mapped + bool(answer), right + (answer == [case["node"]])
            assert not answer or case["node"] in answer, case  # never a confident wrong node
    assert (total, mapped, right) == (183, 183, 183)


def test_a_welford_reduction_is_its_node_and_an_embedding_index_is_no_node():
    """No swap reaches these (var_mean has none; an index computes no node), so their lines are checked here: the
    looped Welford reduction of a LayerNorm over 4096 (its call split over three lines) is `var_mean`; GPT-2's token
    ids wrapped for the embedding's gather compute no node, and do not make the add after them `add_6`."""
    graph, mapped = mapped_lines(TRITON / "block_wide")
    code = graph.output_code_lines
    first = next(n for n in range(1, len(code) + 1) if code[n - 1].strip().startswith("tmp2_mean = tl.zeros"))
    last = next(n for n in range(first, len(code) + 1) if "triton_helpers.welford(" in code[n - 1])
    welford = [n for n in range(first, last + 1) if "tmp2_" in code[n - 1] or "welford" in code[n - 1]
               or code[n - 1].strip() == ")"]
    assert [code[n - 1].strip()[:19] for n in welford] == [
        "tmp2_mean = tl.zero", "tmp2_m2 = tl.zeros(", "tmp2_weight = tl.ze", "tmp2_mean_next, tmp",
        "tmp1, tmp2_mean, tm", ")", "tmp2_mean = tl.wher", "tmp2_m2 = tl.where(", "tmp2_weight = tl.wh",
        "tmp3, tmp4, tmp5 = "]
    assert all(mapped.get(n) == ["var_mean"] for n in welford)
    graph, mapped = mapped_lines(TRITON / "gpt2")
    code = graph.output_code_lines
    start = code.index("    tmp4 = tl.full([1, 1], 100, tl.int32)") + 1
    assert [code[n - 1].strip()[:16] for n in range(start, start + 7)] == [
        "tmp4 = tl.full([", "tmp5 = tmp3 + tm", "tmp6 = tmp3 < 0", "tmp7 = tl.where(", "tl.device_assert",
        "tmp9 = tl.load(i", "tmp11 = tmp9 + t"]
    assert [mapped.get(n) for n in range(start, start + 7)] == [None] * 6 + [["add_1"]]


def test_the_cases_cover_every_kind_of_statement():
    texts = [c["text"] for cases in CASES.values() for c in cases]
    for spelling in (".exp()", "tmp_acc", "1 / std::sqrt(", "decltype(", " * ", " - ", " + "):
        assert any(spelling in t for t in texts), spelling
    triton = [c["text"] for cases in TRITON_CASES.values() for c in cases]
    for spelling in ("libdevice.exp(", "tl.sum(", "triton_helpers.max2(", "triton_helpers.min2(", "tl.where(xmask",
                     "tl.sigmoid(", "libdevice.rsqrt(", "tl_math.log(", "tl.full(", " * ", " - ", " + ", "_tmp",
                     "triton_helpers.maximum(_tmp", "triton_helpers.minimum(_tmp", "tl.sum(_tmp"):
        assert any(spelling in t for t in triton), spelling
