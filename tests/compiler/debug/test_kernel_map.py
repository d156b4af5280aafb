"""kernel_map.json maps every generated statement to the FX node it came from, and every node to the
line of *this file* that created it; the debug directory holds the contract's files."""
import json
import pathlib
import re
import subprocess
import sys

import torch

from tests.compiler.conftest import compile_with_debug

THIS_FILE = str(pathlib.Path(__file__).resolve())
CONTRACT_FILES = {"fx_graph_readable.py", "fx_graph_runnable.py", "fx_graph_transformed.py", "ir_pre_fusion.txt",
                  "ir_post_fusion.txt", "output_code.py", "kernel_map.json"}


def model(x, y, w):
    a = torch.relu(x * 2)  # LINE_A
    b = torch.softmax(a + y, dim=-1)  # LINE_B
    c = b @ w  # LINE_C
    return torch.tanh(c).sum(dim=0)  # LINE_D


def _line_of(tag: str) -> int:
    for i, line in enumerate(pathlib.Path(THIS_FILE).read_text().splitlines(), 1):
        if line.rstrip().endswith(f"# {tag}"):
            return i
    raise AssertionError(tag)


def test_every_statement_maps_to_the_right_source_line(tmp_path):
    x, y, w = torch.randn(16, 32), torch.randn(1, 32), torch.randn(32, 8)
    out, graph_dir = compile_with_debug(tmp_path, model, x, y, w)
    torch.testing.assert_close(out, model(x, y, w), atol=1e-5, rtol=1e-5)
    kmap = json.loads((graph_dir / "kernel_map.json").read_text())
    assert kmap["version"] == 1 and kmap["status"] == "ok"
    nodes = {n["name"]: n for n in kmap["nodes"]}
    expected_lines = {_line_of(t) for t in ("LINE_A", "LINE_B", "LINE_C", "LINE_D")}
    readable = (graph_dir / "fx_graph_readable.py").read_text().splitlines()
    code = (graph_dir / "output_code.py").read_text().splitlines()
    statement = re.compile(r"^\s*(auto tmp\d+ = |(in|out)_ptr\d+\[|\w+ acc_|acc_\w+ = |if \(|cpp_fused_|buf\d+ = )")
    checked = 0
    for kernel in kmap["kernels"]:
        start, end = kernel["output_code_lines"]
        mapped = {e["output_code_line"]: e["nodes"] for e in kernel["lines"]}
        for lineno in range(start, end + 1):
            if not statement.match(code[lineno - 1]):
                continue
            assert lineno in mapped, f"statement without FX node: {lineno}: {code[lineno - 1]}"
            for name in mapped[lineno]:
                node = nodes[name]
                assert node["source"]["file"] == THIS_FILE
                assert node["source"]["line"] in expected_lines, (name, node["source"])
                # the node's readable line is its statement in fx_graph_readable.py
                assert readable[node["readable_line"] - 1].lstrip().startswith(f"{name}")
            checked += 1
    assert checked >= 8
    kinds = {k["kind"] for k in kmap["kernels"]}
    # softmax and the sum are reductions, the matmul an extern call; the pointwise ops may have a kernel of their
    # own or fuse into the softmax's (they do today); no other kind exists
    assert {"reduction", "extern"} <= kinds <= {"pointwise", "reduction", "extern"}


def test_fx_comment_precedes_statements_with_the_node_line(tmp_path):
    _, graph_dir = compile_with_debug(tmp_path, model, torch.randn(4, 8), torch.randn(1, 8), torch.randn(8, 2))
    kmap = json.loads((graph_dir / "kernel_map.json").read_text())
    code = (graph_dir / "output_code.py").read_text().splitlines()
    readable_line = {n["name"]: n["readable_line"] for n in kmap["nodes"]}
    for kernel in kmap["kernels"]:
        if kernel["kind"] == "extern":
            continue
        for entry in kernel["lines"]:
            # walk back to the nearest "Corresponding FX code line" comment
            i = entry["output_code_line"] - 2
            while i > 0 and "Corresponding FX code line" not in code[i] and "extern \"C\"" not in code[i]:
                i -= 1
            if "Corresponding FX code line" in code[i] and not code[entry["output_code_line"] - 1].strip().startswith(
                    ("cpp_fused", "buf")):
                n = int(code[i].rsplit(":", 1)[1])
                assert n in {readable_line[x] for x in entry["nodes"]}


def test_debug_dir_has_the_contract_files_and_they_run_standalone(tmp_path):
    _, graph_dir = compile_with_debug(tmp_path, model, torch.randn(4, 8), torch.randn(1, 8), torch.randn(8, 2))
    assert CONTRACT_FILES <= {p.name for p in graph_dir.iterdir()}
    for script, expect in (("output_code.py", "ms per call"), ("fx_graph_runnable.py", "OK: lens matches eager")):
        proc = subprocess.run([sys.executable, script], cwd=graph_dir, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert expect in proc.stdout
    readable = (graph_dir / "fx_graph_readable.py").read_text()
    assert f"# File: {THIS_FILE}:{_line_of('LINE_A')} in model, code: a = torch.relu(x * 2)" in readable
    assert "Kernel" in (graph_dir / "ir_post_fusion.txt").read_text()
    assert "ComputedBuffer" in (graph_dir / "ir_pre_fusion.txt").read_text()


def test_profile_of_output_code_groups_kernels_by_category(tmp_path):
    _, graph_dir = compile_with_debug(tmp_path, model, torch.randn(64, 32), torch.randn(1, 32), torch.randn(32, 8))
    proc = subprocess.run([sys.executable, "output_code.py", "-p"], cwd=graph_dir, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "== reduction category kernels ==" in proc.stdout
    assert "== extern category kernels ==" in proc.stdout
    trace = json.loads((graph_dir / "compiled_module_profile.json").read_text())
    names = {e.get("name") for e in trace["traceEvents"]}
    kmap = json.loads((graph_dir / "kernel_map.json").read_text())
    assert {k["name"] for k in kmap["kernels"] if k["kind"] != "extern"} <= names
