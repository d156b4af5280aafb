"""check-accuracy and narrow on training programs, through the real CLI: a bug in a backward graph alone is found
and named on its line, an optimizer step compiled with torch.compile(opt.step) is checked by what it changes in
place, the check changes nothing the program sees, and graph folders keep consecutive numbers."""
import json
import pathlib
import subprocess
import sys
import textwrap

TRAIN = """
import torch

torch.manual_seed(0)
x = torch.randn(8, 16)
w = torch.randn(16, 4, requires_grad=True)


def f(x, w):
    return torch.tanh(x @ w).sum()


loss = torch.compile(f, backend="lens")(x, w)
loss.backward()
compiled_grad = w.grad.clone()
w.grad = None
f(x, w).backward()
print("grad max abs diff", (compiled_grad - w.grad).abs().max().item())
"""
TANH_LINE = 10  # `return torch.tanh(x @ w).sum()`: tanh's backward is 1 - y*y, the only `sub` of the program

STEP = """
import torch

torch.manual_seed(0)
model = torch.nn.Linear(8, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
step = torch.compile(opt.step, backend="lens")
x = torch.randn(16, 8)
for i in range(2):
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    step()
print("weight sum", repr(model.weight.sum().item()))
"""


def kernel_lens(*args, cwd):
    return subprocess.run([sys.executable, "-m", "compiler", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


def script(tmp_path, text: str) -> pathlib.Path:
    path = tmp_path / "prog.py"
    path.write_text(textwrap.dedent(text))
    return path


def graph_folders(tmp_path) -> list[pathlib.Path]:
    (run,) = tmp_path.glob("torch_compile_debug/run_*")
    return sorted((run / "lens").glob("graph_*"))


def test_a_bug_only_the_backward_graph_has_is_found_and_named_on_its_line(tmp_path):
    prog = script(tmp_path, TRAIN)
    proc = kernel_lens("check-accuracy", str(prog), "--op-override", "sub={x} + {y}", cwd=tmp_path)
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr[-2000:]
    assert "checked 2 graph(s): 1 mismatch(es)" in out
    assert "the compiled graph's gradients differ from eager's: gradient of input l_w_:" in out
    assert "graph_0 (forward): ok" in out
    line = next(ln for ln in out.splitlines() if "graph_1 (backward): MISMATCH" in ln)
    assert f"first diverging node sub (aten.sub.Tensor) in the backward of {prog}:{TANH_LINE} " in line
    assert "`return torch.tanh(x @ w).sum()`" in line
    forward, backward = (json.loads((g / "accuracy.json").read_text()) for g in graph_folders(tmp_path))
    assert forward["status"] == "ok"
    assert backward["status"] == "mismatch" and backward["node"] == "sub"
    assert backward["source"]["line"] == TANH_LINE


def test_a_correct_training_step_passes_and_the_check_changes_nothing_the_program_sees(tmp_path):
    prog = script(tmp_path, STEP)
    plain = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    proc = kernel_lens("check-accuracy", str(prog), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    assert "checked 2 graph(s): 0 mismatch(es)" in proc.stdout
    # the step's parameters are the graph's attributes: the check ran it three times on them and put them back
    weight = next(ln for ln in plain.stdout.splitlines() if ln.startswith("weight sum"))
    assert weight in proc.stdout.splitlines()


def test_an_optimizer_step_compiled_alone_is_checked_by_what_it_changes_in_place(tmp_path):
    prog = script(tmp_path, STEP)
    # SGD's momentum buffer is updated by `buf.mul_(momentum).add_(grad)`: add computed as a subtraction
    proc = kernel_lens("check-accuracy", str(prog), "--op-override", "add={x} - {y}", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    assert "the compiled graph's inputs changed in place differ from eager's: input self___param_groups_0" in \
        proc.stdout
    assert "first diverging node add (aten.add.Tensor) at " in proc.stdout and "sgd.py" in proc.stdout
    assert [g.name for g in graph_folders(tmp_path)] == ["graph_0", "graph_1"]


def test_graph_folders_stay_consecutive_when_the_node_search_compiles(tmp_path):
    prog = script(tmp_path, TRAIN)
    # tanh itself wrong: the forward differs, its node search compiles an instrumented graph before the backward
    proc = kernel_lens("check-accuracy", str(prog), "--op-override", "tanh={x}", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    assert "graph_0 (forward): MISMATCH; first diverging node tanh (aten.tanh.default)" in proc.stdout
    assert [g.name for g in graph_folders(tmp_path)] == ["graph_0", "graph_1"]  # was graph_0, graph_2


def test_narrow_checks_gradients(tmp_path):
    prog = script(tmp_path, TRAIN)
    proc = kernel_lens("narrow", str(prog), "--op-override", "sub={x} + {y}", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    rows = {ln.split()[0]: ln for ln in proc.stdout.splitlines() if ln.split()[:1] in (["eager"], ["aot_eager"],
                                                                                        ["lens"])}
    assert rows["eager"].endswith("ok") and rows["aot_eager"].endswith("ok")
    assert rows["lens"].endswith("accuracy mismatch in 1 graph(s): gradients differ")
    assert "first failing stage: lens" in proc.stdout


def test_a_backward_compiled_with_its_forward_over_size_symbols_is_checked_as_a_backward(tmp_path):
    # mark_dynamic: AOTAutograd compiles the backward with the forward, not at its first call
    prog = script(tmp_path, TRAIN.replace("loss = torch.compile", "torch._dynamo.mark_dynamic(x, 0)\nloss = "
                                                                   "torch.compile"))
    proc = kernel_lens("check-accuracy", str(prog), "--op-override", "sub={x} + {y}", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    assert "graph_0 (forward): ok" in proc.stdout
    assert "graph_1 (backward): MISMATCH; first diverging node sub" in proc.stdout
    assert f"in the backward of {prog}:{TANH_LINE} " in proc.stdout
