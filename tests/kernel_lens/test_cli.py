"""`kernel-lens`: the compiler's commands and the language server's `index`/`trace` reports in one process (the
server's reports used to run as a `python -m lsp_server` child of the compiler's CLI)."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_lens import cli

REPO = Path(__file__).resolve().parents[2]
FOO1_RUNS = REPO / "tests" / "fixtures" / "lens_foo1" / "runs"
TRACE_FIXTURES = REPO / "tests" / "fixtures" / "torch_trace"


@pytest.fixture
def no_child_processes(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f"kernel-lens started a child process: {args}")
    monkeypatch.setattr(subprocess, "run", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)


def test_index_is_printed_in_process(no_child_processes, capsys):
    assert cli.main(["index", str(FOO1_RUNS), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    kernels = {k["name"] for run in report["runs"] for g in run["graphs"] for k in g["kernels"]}
    assert "cpp_fused_cat_maximum_neg_0" in kernels


def test_trace_is_printed_in_process(no_child_processes, capsys):
    assert cli.main(["trace", str(TRACE_FIXTURES)]) == 0
    assert "graph break" in capsys.readouterr().out.lower()


def test_the_command_lists_both_halves_and_the_compiler_alone_its_own():
    listed = subprocess.run([sys.executable, "-m", "kernel_lens", "--help"], capture_output=True, text=True,
                            cwd=REPO, timeout=120)
    assert listed.returncode == 0 and all(v in listed.stdout for v in ("compile", "profile", "index", "trace"))
    alone = subprocess.run([sys.executable, "-m", "compiler", "index", str(FOO1_RUNS)], capture_output=True,
                           text=True, cwd=REPO, timeout=120)
    assert alone.returncode == 2 and "invalid choice: 'index'" in alone.stderr


BREAK_AND_TRAIN = """
import torch


def step(x, w):
    y = torch.tanh(x @ w)
    print("a graph break")
    return y.sum()


w = torch.randn(8, 4, requires_grad=True)
torch.compile(step, backend="lens")(torch.randn(6, 8), w).backward()
"""


@pytest.fixture(scope="module")
def training_run(tmp_path_factory) -> Path:
    """A real `kernel-lens compile` of a training step with a graph break: its debug directory and trace."""
    folder = tmp_path_factory.mktemp("train")
    (folder / "prog.py").write_text(BREAK_AND_TRAIN)
    proc = subprocess.run([sys.executable, "-m", "kernel_lens", "compile", str(folder / "prog.py")],
                          capture_output=True, text=True, cwd=folder, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    return folder


def test_index_marks_graphs_forward_and_backward(training_run, capsys):
    assert cli.main(["index", str(training_run)]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("  graph_")]
    # the break splits the step in two Dynamo graphs: two forward graphs, then their backward graphs
    assert [ln.split()[1] for ln in lines] == ["(forward)", "(forward)", "(backward)", "(backward)"], lines
    assert cli.main(["index", str(training_run), "--json"]) == 0
    graphs = json.loads(capsys.readouterr().out)["runs"][0]["graphs"]
    assert [g["direction"] for g in graphs] == ["forward", "forward", "backward", "backward"]


def test_trace_prints_each_hint_once_and_indents_dynamos_explanations(training_run, capsys):
    assert cli.main(["trace", str(training_run / "torch_trace")]) == 0
    lines = capsys.readouterr().out.splitlines()
    hints = [ln.strip() for ln in lines if ln.strip().lower().startswith("hint:")]
    assert hints and len(hints) == len(set(hints)), hints  # each once (a restart repeated them all)
    restart = next(i for i, ln in enumerate(lines) if ln.startswith("      restart: "))
    explanation = next(ln for ln in lines[restart:] if "Explanation:" in ln)
    assert explanation.startswith("          Explanation: ")  # under its restart, not at the left margin
    assert all(ln.startswith("  ") for ln in lines[3:] if ln)  # under "rank -": nothing back at column 0


POINTWISE = """
import torch

DEVICE = "{device}"


def f(x, y):
    return torch.sigmoid(x) * y + 1.0


x, y = torch.randn(4096, 512, device=DEVICE), torch.randn(4096, 512, device=DEVICE)
print(float(torch.compile(f)(x, y).sum()))
"""


def compile_pointwise(folder: Path, device: str) -> tuple[str, Path]:
    """A real `kernel-lens compile` of a one-kernel Inductor program on `device`, with fresh caches."""
    (folder / "prog.py").write_text(POINTWISE.format(device=device))
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(folder / "inductor_cache"),
           "TRITON_CACHE_DIR": str(folder / "triton")}
    proc = subprocess.run([sys.executable, "-m", "kernel_lens", "compile", str(folder / "prog.py")], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    (run,) = folder.glob("torch_compile_debug/run_*")
    return proc.stdout, run


def test_compile_of_a_cpu_run_keeps_no_triton_entries_and_says_nothing_of_them(tmp_path: Path):
    out, run = compile_pointwise(tmp_path, "cpu")
    assert any("cpp_fused" in p.read_text() for p in run.glob("torchinductor/*/output_code.py"))
    assert "triton" not in out.lower() and not (run / "triton_cache").exists()


@pytest.mark.gpu
def test_compile_on_a_gpu_keeps_the_runs_triton_cache_entries_beside_its_debug_dir(tmp_path: Path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    out, run = compile_pointwise(tmp_path, "cuda")
    kernels = {m for p in run.glob("torchinductor/*/output_code.py")
               for m in re.findall(r"^(triton_\w+) = async_compile\.triton\(", p.read_text(), re.M)}
    assert kernels, out
    kept = run / "triton_cache"
    assert f"Triton cache entries kept: {kept} (" in out
    for name in kernels:  # each kernel's entries (one per config compiled), with their stages, from this run's cache
        entries = {p.parent for p in kept.glob(f"*/{name}.json")}
        assert entries, name
        for entry in entries:
            assert {f"{name}{s}" for s in (".ttir", ".ttgir", ".llir", ".ptx", ".cubin")} <= \
                {p.name for p in entry.iterdir()}
            assert (tmp_path / "triton" / entry.name / f"{name}.json").is_file()
