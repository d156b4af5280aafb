"""kernel-lens diff: two real runs matched by source and target; fusion splits named, code changes,
times and outputs compared; `--json` keeps the documented shape."""
import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import compiler.config as config
from compiler.cli import main as kernel_lens
from compiler.tools.run_diff import diff_runs
from tests.compiler.tools.foo1_program import NEG_BUG
from tests.compiler.tools.foo1_program import PROGRAM as PROGRAM_A

CHAIN = '''
import torch


def chain(a0, a1, a2, a3, a4):
    b = (a0 + a1) + a2
    c = b * a3
    return c + a4


torch.manual_seed(0)
args = [torch.randn(64, 32) for _ in range(5)]
torch.testing.assert_close(torch.compile(chain, backend="lens")(*args), chain(*args))
'''

# B: every line moved down by two, and one more `mul` before the softmax's (so FX names shift: mul -> mul_1)
PROGRAM_B = "\n# edited\n" + PROGRAM_A.replace("    s = x * scale", "    x = x * 1.0\n    s = x * scale")
DOC_KEYS = {"version", "a", "b", "changed", "summary", "graphs"}
GRAPH_KEYS = {"a", "b", "a_dir", "b_dir", "change", "nodes_added", "nodes_removed", "kernels", "time_ms", "outputs"}
KERNEL_KEYS = {"change", "a", "b", "nodes", "code_diff", "time_ms"}
NODE_KEYS = {"target", "source", "a", "b", "a_kernel", "b_kernel"}


def kernel_lens_child(*args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "compiler", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600, env={**os.environ, **(env or {})})


def test_max_fusion_size_split_is_named_by_diff(tmp_path):
    script = tmp_path / "chain.py"
    script.write_text(textwrap.dedent(CHAIN))
    runs = []
    for size in ("64", "2"):
        before = set(tmp_path.glob("torch_compile_debug/run_*"))
        proc = kernel_lens_child("compile", "--save-tensors", str(script), cwd=tmp_path,
                                 env={"LENS_MAX_FUSION_SIZE": size})
        assert proc.returncode == 0, proc.stderr[-2000:]
        (run,) = set(tmp_path.glob("torch_compile_debug/run_*")) - before
        runs.append(run)
    proc = kernel_lens_child("diff", str(runs[0]), str(runs[1]), "--json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert set(doc) == DOC_KEYS and doc["version"] == 1 and doc["changed"] is True
    (graph,) = doc["graphs"]
    assert set(graph) == GRAPH_KEYS and graph["change"] == "changed"
    (split,) = graph["kernels"]
    assert set(split) == KERNEL_KEYS and split["change"] == "split"
    assert split["a"] == ["cpp_fused_add_mul_0"] and len(split["b"]) == 2
    assert all(set(n) == NODE_KEYS for n in split["nodes"])
    moved = {n["source"]["code"]: n["b_kernel"] for n in split["nodes"]}
    assert moved["c = b * a3"] == moved["return c + a4"] != moved["b = (a0 + a1) + a2"]
    assert {n["a_kernel"] for n in split["nodes"]} == {"cpp_fused_add_mul_0"}
    assert graph["outputs"]["status"] == "same"  # saved outputs, compared bit for bit
    assert doc["summary"]["fused_differently"] == 1 and doc["summary"]["kernels_same"] == 0
    assert kernel_lens(["diff", str(runs[0]), str(runs[0])]) == 0


def load_program(folder, text, name):
    """The program as `prog.py` in `folder` (two versions of one script keep its file name)."""
    path = folder / "prog.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def profiled_run(root, prog, op_overrides, monkeypatch):
    """foo1 and scaled_softmax compiled with lens, profiled, tensors saved; the run folder."""
    monkeypatch.setenv("LENS_PROFILE", "1:3")
    monkeypatch.setattr(config, "debug", True)
    monkeypatch.setattr(config, "debug_dir_root", str(root))
    monkeypatch.setattr(config, "save_tensors", True)
    monkeypatch.setattr(config.cpp, "enable_kernel_profile", True)
    monkeypatch.setattr(config.cpp, "op_overrides", dict(op_overrides))
    torch._dynamo.reset()
    torch.manual_seed(0)
    x1 = torch.randint(0, 256, (1, 8), dtype=torch.uint8)
    x2 = torch.randint(0, 256, (8390, 8), dtype=torch.uint8)
    torch.compile(prog.foo1, backend="lens")(x1, x2)
    torch.compile(prog.scaled_softmax, backend="lens")(torch.randn(64, 32), 0.5)
    (run,) = list(root.glob("run_*"))
    return run


@pytest.fixture(scope="module")
def run_pair(tmp_path_factory):
    monkeypatch = pytest.MonkeyPatch()
    try:
        prog_a = load_program(tmp_path_factory.mktemp("version_a"), PROGRAM_A, "prog_a")
        prog_b = load_program(tmp_path_factory.mktemp("version_b"), PROGRAM_B, "prog_b")
        a = profiled_run(tmp_path_factory.mktemp("a"), prog_a, {}, monkeypatch)
        b = profiled_run(tmp_path_factory.mktemp("b"), prog_b, NEG_BUG, monkeypatch)
    finally:
        monkeypatch.undo()
    return a, b


def test_code_change_times_and_outputs_of_the_neg_bug(run_pair):
    doc = diff_runs(str(run_pair[0]), str(run_pair[1]))
    foo1 = doc["graphs"][0]
    assert foo1["nodes_added"] == [] and foo1["nodes_removed"] == []  # matched although every line moved
    (kernel,) = foo1["kernels"]
    assert kernel["change"] == "code_changed" and kernel["a"] == kernel["b"] == ["cpp_fused_cat_maximum_neg_0"]
    assert "-                auto tmp2 = decltype(tmp1)(-tmp1);" in kernel["code_diff"]
    assert "+                auto tmp2 = decltype(tmp1)(2 * tmp1);" in kernel["code_diff"]
    assert kernel["time_ms"]["a"] > 0 and kernel["time_ms"]["b"] > 0
    assert foo1["time_ms"]["a"] > 0 and foo1["time_ms"]["b"] > 0
    assert foo1["outputs"]["status"] == "changed" and foo1["outputs"]["max_abs_error"] > 0
    assert doc["summary"]["code_changed"] == 1 and doc["summary"]["outputs_changed"] == 1


def test_nodes_are_matched_by_source_and_target_not_by_name(run_pair):
    doc = diff_runs(str(run_pair[0]), str(run_pair[1]))
    softmax = doc["graphs"][1]
    (added,) = softmax["nodes_added"]
    assert added["name"] == "mul" and added["source"]["code"] == "x = x * 1.0"
    assert softmax["nodes_removed"] == []
    first = softmax["kernels"][0]
    assert first["change"] == "nodes_changed"
    scale = next(n for n in first["nodes"] if n["source"]["code"] == "s = x * scale")
    assert (scale["a"], scale["b"]) == ("mul", "mul_1")
    assert softmax["kernels"][1]["change"] == "same"
    assert softmax["outputs"]["status"] == "same"


def test_diff_text_report_and_exit_codes(run_pair, tmp_path, capsys):
    a, b = run_pair
    assert kernel_lens(["diff", str(a), str(b)]) == 1
    text = capsys.readouterr().out
    assert "code_changed   cpp_fused_cat_maximum_neg_0 -> cpp_fused_cat_maximum_neg_0" in text
    assert "outputs: changed: max abs error" in text and "node added: mul (aten.mul.Tensor" in text
    assert kernel_lens(["diff", str(a), str(a)]) == 0
    assert "outputs: same (bit for bit)" in capsys.readouterr().out
    assert kernel_lens(["diff", str(a), str(tmp_path / "missing")]) == 2
    assert kernel_lens(["diff", str(a), str(tmp_path)]) == 2


EDITED_LINE = '''
import torch


def block(x, y):
    a = torch.relu(x)
    h = torch.softmax(a * 0.5, dim=-1) + torch.tanh(y)
    return h.sum(dim=0)
'''


def compiled_run(root, prog, monkeypatch):
    """`block` compiled with lens and its debug folder written under `root`; the run folder."""
    monkeypatch.setattr(config, "debug", True)
    monkeypatch.setattr(config, "debug_dir_root", str(root))
    torch._dynamo.reset()
    torch.manual_seed(0)
    torch.compile(prog.block, backend="lens")(torch.randn(16, 32), torch.randn(16, 32))
    (run,) = list(root.glob("run_*"))
    return run


@pytest.mark.parametrize("edit, added, removed", [
    (("a * 0.5", "a * 0.25"), [], []),  # the same ops: nothing is new, the kernel's code changed
    (("+ torch.tanh", "- torch.tanh"), ["aten.sub.Tensor"], ["aten.add.Tensor"]),  # one op became another
])
def test_one_token_edited_on_one_line_changes_only_its_nodes(tmp_path, monkeypatch, edit, added, removed):
    runs = []
    for version, text in (("a", EDITED_LINE), ("b", EDITED_LINE.replace(*edit))):
        (tmp_path / f"src_{version}").mkdir()  # one file name, prog.py, in both versions
        prog = load_program(tmp_path / f"src_{version}", text, f"block_{version}")
        runs.append(compiled_run(tmp_path / f"debug_{version}", prog, monkeypatch))
    doc = diff_runs(str(runs[0]), str(runs[1]))
    (graph,) = doc["graphs"]
    assert [n["target"] for n in graph["nodes_added"]] == added
    assert [n["target"] for n in graph["nodes_removed"]] == removed
    assert all(n["source"]["code"].startswith("h = torch.softmax")
               for n in graph["nodes_added"] + graph["nodes_removed"])
    nodes = [n for k in graph["kernels"] for n in k["nodes"]]
    edited = [n for n in nodes if n["source"] and n["source"]["code"].startswith("h = ")]
    assert len([n for n in edited if n["a"] and n["b"]]) >= 5  # the line's softmax nodes matched, not replaced
    if not added:
        assert {k["change"] for k in graph["kernels"]} <= {"same", "code_changed"}
        assert doc["summary"]["code_changed"] >= 1


ADDED_GRAPH = CHAIN + '''
def later(x, w):
    return torch.softmax(x @ w, dim=-1).sum(0) + x.mean()


if ADD_GRAPH:
    torch.compile(later, backend="lens")(torch.randn(16, 32), torch.randn(32, 8))
'''


def test_a_graph_only_one_run_has_counts_each_of_its_kernels(tmp_path):
    runs = []
    for name, add in (("a", False), ("b", True)):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "prog.py").write_text(ADDED_GRAPH.replace("if ADD_GRAPH:", f"if {add}:"))
        proc = kernel_lens_child("compile", str(folder / "prog.py"), cwd=folder)
        assert proc.returncode == 0, proc.stderr[-2000:]
        (run,) = folder.glob("torch_compile_debug/run_*")
        runs.append(run)
    added = json.loads((runs[1] / "lens" / "graph_1" / "kernel_map.json").read_text())["kernels"]
    assert len(added) > 1
    doc = diff_runs(str(runs[0]), str(runs[1]))
    assert doc["summary"]["graphs_added"] == 1 and doc["summary"]["kernels_added"] == len(added)  # was 1
    proc = kernel_lens_child("diff", str(runs[0]), str(runs[1]), cwd=tmp_path)
    assert f"{len(added)} kernels added" in proc.stdout and "1 graph added" in proc.stdout
