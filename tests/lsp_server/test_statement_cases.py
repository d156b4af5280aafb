"""Every statement case of benchmarks/statement_map_bench.py (tests/fixtures/inductor_statements: real Inductor CPU
runs, each statement's node found by swapping that node's op and seeing which statements change) is mapped by the
index to exactly its node: not a neighbour, not "one of"."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lsp_server.loading.graph_builder import build_graph
from lsp_server.model import Graph

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "inductor_statements"
CASES = json.loads((FIXTURE / "cases.json").read_text())


@pytest.mark.parametrize("program", sorted(CASES))
def test_each_statement_maps_to_the_node_whose_swap_changes_it(program: str):
    graph = Graph(program, FIXTURE / program, "fixture")
    build_graph(graph)
    assert not graph.problems
    mapped = {line.line: line.nodes for kernel in graph.kernels if kernel.language == "cpp" for line in kernel.lines}
    code = graph.output_code_lines
    cases = CASES[program]
    assert cases
    for case in cases:
        assert code[case["line"] - 1].strip() == case["text"]
        assert mapped.get(case["line"]) == [case["node"]], case


def test_the_cases_cover_every_kind_of_statement():
    texts = [c["text"] for cases in CASES.values() for c in cases]
    for spelling in (".exp()", "tmp_acc", "1 / std::sqrt(", "decltype(", " * ", " - ", " + "):
        assert any(spelling in t for t in texts), spelling
