"""kernel-lens gen-tests: per-kernel pytest files from real lens runs pass on a healthy run and fail on
the seed's injected `neg` bug (run under pytest in a child process)."""
import importlib.util
import json
import pathlib
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest
import torch

import compiler.config as config
from compiler.cli import main as kernel_lens
from compiler.tools.kernel_subgraph import forward_variables, kernel_boundary, load_named_graph, recorded_op_overrides
from compiler.tools.testgen import graph_dirs
from tests.compiler.tools.foo1_program import NEG_BUG, PROGRAM


def load_program(tmp_path):
    path = tmp_path / "prog.py"
    path.write_text(textwrap.dedent(PROGRAM))
    spec = importlib.util.spec_from_file_location("prog_testgen", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lens_run(root, calls, save_tensors=False, op_overrides=None):
    """Run each (fn, args) compiled with lens, debug dirs under `root`; the run folder."""
    old = (config.debug, config.debug_dir_root, config.save_tensors, dict(config.cpp.op_overrides))
    config.debug, config.debug_dir_root, config.save_tensors = True, str(root), save_tensors
    config.cpp.op_overrides = dict(op_overrides or {})
    try:
        torch._dynamo.reset()
        for fn, args in calls:
            torch.compile(fn, backend="lens")(*args)
    finally:
        config.debug, config.debug_dir_root, config.save_tensors, config.cpp.op_overrides = old
    (run,) = list(root.glob("run_*"))
    return run


def seed_inputs():
    torch.manual_seed(0)
    x1 = torch.randint(0, 256, (1, 8), dtype=torch.uint8)
    x2 = torch.randint(0, 256, (8390, 8), dtype=torch.uint8)
    return x1, x2


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    prog = load_program(tmp_path_factory.mktemp("prog"))
    healthy = lens_run(tmp_path_factory.mktemp("healthy"),
                       [(prog.foo1, seed_inputs()), (prog.scaled_softmax, (torch.randn(64, 32), 0.5))],
                       save_tensors=True)
    buggy = lens_run(tmp_path_factory.mktemp("buggy"), [(prog.foo1, seed_inputs())], op_overrides=NEG_BUG)
    return healthy, buggy


def run_pytest(folder, report):
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(folder),
                           f"--junitxml={report}"], capture_output=True, text=True, timeout=600, cwd=folder)
    cases = {c.get("name"): c.find("failure") is None for c in ET.parse(report).getroot().iter("testcase")}
    return proc, cases


def test_generated_tests_pass_on_a_healthy_run(runs, tmp_path):
    healthy, _ = runs
    out = tmp_path / "generated"
    assert kernel_lens(["gen-tests", str(healthy), "-o", str(out)]) == 0
    foo1, softmax = (pathlib.Path(d).name for d in graph_dirs(str(healthy)))  # graph ids count per process
    files = sorted(p.name for p in out.glob("test_*.py"))
    assert files == [f"test_{foo1}_cpp_fused_cat_maximum_neg_0.py", f"test_{softmax}_cpp_fused__softmax_mul_0.py",
                     f"test_{softmax}_cpp_fused__softmax_sum_1.py"]
    assert len(list(out.glob("*_inputs.pt"))) == 3  # tensors were saved: the tests use the real inputs
    text = (out / f"test_{softmax}_cpp_fused__softmax_sum_1.py").read_text()
    assert "def forward(self, exp, sum_1):" in text and "torch.ops.aten.mul.Tensor(exp, reciprocal)" in text
    sum_line = PROGRAM.splitlines().index("    return p.sum(dim=0)") + 1
    assert "return (sum_2,)" in text and f"prog.py:{sum_line} in scaled_softmax: return p.sum(dim=0)" in text
    proc, cases = run_pytest(out, tmp_path / "report.xml")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert len(cases) == 3 and all(cases.values()), cases


def test_generated_test_fails_on_the_injected_neg_bug(runs, tmp_path):
    _, buggy = runs
    out = tmp_path / "generated"
    assert kernel_lens(["gen-tests", str(buggy), "-o", str(out)]) == 0
    (test_file,) = out.glob("test_*.py")
    text = test_file.read_text()
    assert f"OP_OVERRIDES = {NEG_BUG!r}" in text  # recorded by fx_graph_runnable.py, replayed by the test
    assert "_SAVED_INPUTS = None" in text and "rand_strided((8390, 8), (8, 1), torch.uint8)" in text
    proc, cases = run_pytest(out, tmp_path / "report.xml")
    assert proc.returncode == 1
    assert cases == {"test_cpp_fused_cat_maximum_neg_0_matches_eager": False}
    assert "cpp_fused_cat_maximum_neg_0: lens differs from eager" in proc.stdout


def test_kernel_boundaries_and_recorded_settings(runs):
    healthy, buggy = runs
    softmax = pathlib.Path(graph_dirs(str(healthy))[1])
    gm, _ = load_named_graph(str(softmax))
    assert forward_variables((softmax / "fx_graph_runnable.py").read_text()) == \
        ["mul", "amax", "sub", "exp", "sum_1", "reciprocal", "mul_1", "sum_2"]
    kernels = json.loads((softmax / "kernel_map.json").read_text())["kernels"]
    first, second = (kernel_boundary(gm, k["name"], k["nodes"]) for k in kernels)
    assert (first.inputs, first.outputs) == (["arg0_1"], ["exp", "sum_1"])
    assert (second.inputs, second.outputs) == (["exp", "sum_1"], ["sum_2"])
    (buggy_graph,) = buggy.glob("lens/graph_*")  # graph ids count on across runs of one process
    assert recorded_op_overrides(str(buggy_graph)) == NEG_BUG
    assert recorded_op_overrides(str(softmax)) == {}


def test_gen_tests_usage_error(tmp_path):
    assert kernel_lens(["gen-tests", str(tmp_path / "missing"), "-o", str(tmp_path / "out")]) == 2
    assert kernel_lens(["gen-tests", str(tmp_path), "-o", str(tmp_path / "out")]) == 2
