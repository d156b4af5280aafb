"""What the debug directory writes runs on graphs over size symbols, through the real CLI: fx_graph_runnable.py
(random and saved inputs), minify's repro.py and gen-tests' files, after an automatic-dynamic recompile, with
mark_dynamic on a training step and with dynamic=True; each compiles the graph over the symbols (no graph runs
eagerly for a size argument) and reproduces a codegen bug where there is one."""
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

SIZE_CHANGE = """
import torch


@torch.compile(backend="lens")
def f(x):
    return torch.nn.functional.softmax(x * 2 - 1, dim=-1).sum(0)


for n in (4, 6):
    print(n, f(torch.randn(n, 8)).shape)
"""

MARKED = """
import torch


def f(x, w):
    return torch.tanh(x @ w).sum()


x = torch.randn(6, 8)
w = torch.randn(8, 4, requires_grad=True)
torch._dynamo.mark_dynamic(x, 0)
torch.compile(f, backend="lens")(x, w).backward()
g = torch.compile(lambda a: (a * 2).softmax(-1), backend="lens", dynamic=True)
print(g(torch.randn(5, 3)).shape)
"""

# runs each script given, as `python SCRIPT` would, in one process (one torch import); exit 1 if one failed
RUN_EACH = """
import os, runpy, sys, traceback
failed = 0
for path in sys.argv[1:]:
    os.chdir(os.path.dirname(path))
    try:
        runpy.run_path(path, run_name="__main__")
        print("PASSED", path, flush=True)
    except BaseException:
        failed += 1
        print("FAILED", path, traceback.format_exc(), flush=True)
sys.exit(1 if failed else 0)
"""


def run(args, cwd, env=None):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, timeout=600,
                          env={**os.environ, **(env or {})})


def compiled_run(tmp_path, text: str, *options, env=None) -> pathlib.Path:
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(text))
    proc = run(["-m", "compiler", "compile", *options, str(prog)], tmp_path, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    (run_dir,) = tmp_path.glob("torch_compile_debug/run_*")
    return run_dir


def symbolic_inputs(graph: pathlib.Path) -> str:
    return re.search(r"^SYMBOLIC_INPUTS = (.*)$", (graph / "fx_graph_runnable.py").read_text(), re.M).group(1)


def test_a_graph_recompiled_for_a_new_size_reproduces_its_bug_in_every_script(tmp_path):
    # exp computed as its argument: softmax's kernels are wrong for every size
    run_dir = compiled_run(tmp_path, SIZE_CHANGE, env={"LENS_OP_OVERRIDES": '{"exp": "{x}"}'})
    graph = run_dir / "lens" / "graph_1"  # the automatic-dynamic recompile
    assert symbolic_inputs(graph) == "['s77', ('(s77, 8)', '(8, 1)')]"
    text = (graph / "fx_graph_runnable.py").read_text()
    assert "SIZES = {'s77': 6}" in text and "    s77 = SIZES['s77']\n" in text
    assert "return [s77, rand_strided((s77, 8), (8, 1), torch.float32)]" in text  # the size argument passed
    proc = run([str(graph / "fx_graph_runnable.py")], graph)
    assert proc.returncode == 1 and "Mismatched elements" in proc.stderr, proc.stderr[-3000:]  # was NameError 's77'

    proc = run(["-m", "compiler", "minify", str(graph)], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    repro = graph / "repro.py"
    assert "SIZES = {'s77': 6}" in repro.read_text()
    header = float(re.search(r"max abs error ([0-9.e+-]+)\)", repro.read_text().splitlines()[0]).group(1))
    proc = run([str(repro)], graph)
    assert proc.returncode == 1 and "runs eagerly" not in proc.stderr, proc.stderr[-3000:]
    got = float(re.search(r"Greatest absolute difference: ([0-9.e+-]+)", proc.stderr).group(1))
    assert header == pytest.approx(got, rel=1e-4)  # the repro's own error, not the whole graph's

    proc = run(["-m", "compiler", "gen-tests", str(graph), "-o", str(tmp_path / "tests")], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    proc = run(["-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "tests")], tmp_path)
    failed = re.findall(r"FAILED \S+::(test_\w+)", proc.stdout)
    assert failed and all("softmax_mul_sub" in name for name in failed), proc.stdout[-3000:]  # exp's kernel
    assert " passed" in proc.stdout and "runs eagerly" not in proc.stdout + proc.stderr


def test_marked_dynamic_training_and_dynamic_true_graphs_run_in_every_script(tmp_path):
    run_dir = compiled_run(tmp_path, MARKED, "--save-tensors")
    graphs = sorted((run_dir / "lens").glob("graph_*"))
    assert len(graphs) == 3  # forward and backward of f (x marked dynamic), the dynamic=True lambda
    for graph in graphs:
        assert "s" in symbolic_inputs(graph), graph  # over size symbols, each of them
    scripts = [str(g / "fx_graph_runnable.py") for g in graphs]
    random_inputs = []
    for graph in graphs:  # the same scripts without their saved inputs: random ones of the compiled sizes
        copy = tmp_path / f"random_{graph.name}"
        copy.mkdir()
        (copy / "fx_graph_runnable.py").write_text((graph / "fx_graph_runnable.py").read_text())
        random_inputs.append(str(copy / "fx_graph_runnable.py"))
    driver = tmp_path / "run_each.py"
    driver.write_text(RUN_EACH)
    proc = run([str(driver), *scripts, *random_inputs], tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.count("OK: lens matches eager") == 6
    assert "runs eagerly" not in proc.stderr, proc.stderr[-3000:]  # a size argument no longer sends it eager

    proc = run(["-m", "compiler", "gen-tests", str(run_dir), "-o", str(tmp_path / "tests")], tmp_path)
    assert proc.returncode == 0 and "saved inputs" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    proc = run(["-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "tests")], tmp_path)
    assert proc.returncode == 0 and " passed" in proc.stdout, proc.stdout[-3000:]
    assert "runs eagerly" not in proc.stdout + proc.stderr
