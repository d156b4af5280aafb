"""`kernel-lens` end to end: real scripts in child processes, real debug directories, exit codes."""
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from compiler.cli import parse_command_line

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "foo1.py"


def kernel_lens(*args, cwd=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "compiler", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout)


def write_script(tmp_path, body: str) -> pathlib.Path:
    path = tmp_path / "prog.py"
    path.write_text(textwrap.dedent(body))
    return path


SEED = """
import torch
import compiler.config
{setup}

def foo1(x1, x2):
    a = torch.neg(x1)
    b = torch.maximum(x2, a)
    y = torch.cat([b], dim=1)
    return y

x1 = torch.randint(0, 256, (1, 8), dtype=torch.uint8)
x2 = torch.randint(0, 256, (8390, 8), dtype=torch.uint8)
assert torch.equal(torch.compile(foo1, backend="lens")(x1, x2), foo1(x1, x2))
"""


def test_compile_writes_debug_dirs_and_exits_zero(tmp_path):
    script = write_script(tmp_path, SEED.format(setup=""))
    proc = kernel_lens("compile", str(script))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "debug directory:" in proc.stdout
    graph = next(tmp_path.glob("torch_compile_debug/run_*/lens/graph_0"))
    assert (graph / "kernel_map.json").exists()
    assert list(tmp_path.glob("torch_trace/*.log")), "compile also writes a TORCH_TRACE log"


def test_script_that_raises_exits_one_and_keeps_its_debug_dirs(tmp_path):
    script = write_script(tmp_path, SEED.format(setup="") + "\nraise RuntimeError('user bug')\n")
    proc = kernel_lens("compile", str(script))
    assert proc.returncode == 1
    assert "RuntimeError: user bug" in proc.stderr
    assert list(tmp_path.glob("torch_compile_debug/run_*/lens/graph_0/output_code.py"))


def test_usage_errors_exit_two(tmp_path):
    assert kernel_lens("compile", str(tmp_path / "missing.py")).returncode == 2
    assert kernel_lens("no-such-command").returncode == 2


def test_check_accuracy_finds_the_seed_neg_bug(tmp_path):
    script = write_script(tmp_path, SEED.format(setup='compiler.config.cpp.op_overrides = '
                                                      '{"neg": "decltype({x})(2 * {x})"}'))
    proc = kernel_lens("check-accuracy", str(script))
    assert proc.returncode == 1
    report = json.loads(next(tmp_path.glob("torch_compile_debug/run_*/lens/graph_0/accuracy.json")).read_text())
    assert report["status"] == "mismatch" and report["node"] == "neg" and report["target"] == "aten.neg.default"
    assert report["source"]["code"] == "a = torch.neg(x1)" and report["source"]["file"] == str(script)
    assert report["max_abs_error"] > 0
    assert "first diverging node neg" in proc.stdout


def test_check_accuracy_passes_a_correct_program(tmp_path):
    script = write_script(tmp_path, SEED.format(setup=""))
    proc = kernel_lens("check-accuracy", str(script))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    report = json.loads(next(tmp_path.glob("torch_compile_debug/run_*/lens/graph_0/accuracy.json")).read_text())
    assert report["status"] == "ok"


def test_minify_shrinks_a_compile_error_and_writes_a_failing_repro(tmp_path):
    body = SEED.format(setup='compiler.config.cpp.op_overrides = {"neg": "-{x}"}').replace(
        "    y = torch.cat([b], dim=1)", "    c = b * 2\n    d = c + 1\n    y = torch.cat([d, b], dim=1)")
    script = write_script(tmp_path, body)
    assert kernel_lens("compile", str(script)).returncode == 1
    graph = next(tmp_path.glob("torch_compile_debug/run_*/lens/graph_0"))
    proc = kernel_lens("minify", str(graph))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "Started off with 5 nodes" in proc.stdout
    assert "SUCCESS" in proc.stdout
    made = int(proc.stdout.split("Made it down to ")[1].split()[0])
    assert made < 5
    repro = subprocess.run([sys.executable, str(graph / "repro.py")], capture_output=True, text=True, timeout=300)
    assert repro.returncode != 0 and "C++ compile error" in repro.stderr


def test_profile_writes_consistent_profile_and_trace(tmp_path):
    script = write_script(tmp_path, SEED.format(setup=""))
    proc = kernel_lens("profile", str(script), "--iters", "5", "--warmup", "1")  # options after SCRIPT count too
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    graph = next(tmp_path.glob("torch_compile_debug/run_*/lens/graph_0"))
    prof = json.loads((graph / "profile.json").read_text())
    assert prof["iters"] == 5
    assert prof["eager_ms"] > 0 and prof["compiled_ms"] > 0 and prof["speedup"] > 0
    kernels = prof["kernels"]
    assert [k["name"] for k in kernels] == ["cpp_fused_cat_maximum_neg_0"]
    assert all(k["total_ms"] > 0 and k["calls"] == 1 for k in kernels)
    assert sum(k["total_ms"] for k in kernels) <= prof["profiled_ms"] * 1.001
    trace = json.loads((graph / "trace.json").read_text())
    assert "cpp_fused_cat_maximum_neg_0" in {e.get("name") for e in trace["traceEvents"]}
    assert "cpp_fused_cat_maximum_neg_0" in proc.stdout


@pytest.mark.timeout(900)
def test_real_inductor_compile_error_is_mapped_to_source(tmp_path):
    script = write_script(tmp_path, """
        import torch
        import torch._inductor.codegen.cpp as cpp
        cpp.CppOverrides.neg = staticmethod(lambda x: f"-{x}")
        torch._inductor.config.cpp.simdlen = 1  # scalar kernels: the overridden neg is what g++ sees

        def foo1(x1, x2):
            a = torch.neg(x1)
            b = torch.maximum(x2, a)
            return torch.cat([b], dim=1)

        x1 = torch.randint(0, 256, (1, 8), dtype=torch.uint8)
        x2 = torch.randint(0, 256, (8390, 8), dtype=torch.uint8)
        torch.compile(foo1)(x1, x2)
    """)
    env_script = script.read_text().replace("import torch\n", "import os\nos.environ['TORCHINDUCTOR_CACHE_DIR'] = "
                                            f"{str(tmp_path / 'inductor_cache')!r}\nimport torch\n", 1)
    script.write_text(env_script)
    proc = kernel_lens("compile", str(script), timeout=900)
    assert proc.returncode == 1
    report = json.loads(next(tmp_path.glob("torch_compile_debug/run_*/torchinductor/*/compile_error.json")).read_text())
    first = next(d for d in report["diagnostics"] if d["severity"] == "error")
    assert "max_propagate_nan" in first["message"]
    assert first["kernel"] == "cpp_fused_maximum_neg_0" and first["nodes"] == ["maximum"]
    assert first["source"]["file"] == str(script) and first["source"]["code"] == "b = torch.maximum(x2, a)"


def test_narrow_reports_lens_as_the_first_failing_stage(tmp_path):
    script = write_script(tmp_path, SEED.format(setup='compiler.config.cpp.op_overrides = '
                                                      '{"neg": "decltype({x})(2 * {x})"}').replace("assert ", "print("
                                                                                                  ).replace(
        "foo1(x1, x2))", "foo1(x1, x2)))"))
    proc = kernel_lens("narrow", str(script))
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    table = proc.stdout.split("backend      graphs  result")[1]
    assert "eager             1  ok" in table and "aot_eager         1  ok" in table
    assert "lens              1  accuracy mismatch in 1 graph(s)" in table
    assert "first failing stage: lens" in proc.stdout


ARGV_SCRIPT = SEED.format(setup="") + "\nimport json, sys\nopen('argv.json', 'w').write(json.dumps(sys.argv[1:]))\n"


def test_options_after_the_script_are_ours_and_its_own_arguments_follow_double_dash(tmp_path):
    script = write_script(tmp_path, ARGV_SCRIPT)
    proc = kernel_lens("compile", str(script), "--save-tensors", "--", "--lr", "0.1", "--save-tensors")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads((tmp_path / "argv.json").read_text()) == ["--lr", "0.1", "--save-tensors"]
    assert list(tmp_path.glob("torch_compile_debug/run_*/lens/graph_0/tensors/inputs.pt"))
    assert parse_command_line(["narrow", "prog.py", "--inductor"]).inductor
    args = parse_command_line(["check-accuracy", "f1.py", "--op-override", "relu=x", "--", "--tol", "1"])
    assert (args.op_override, args.tol, args.script_args) == (["relu=x"], 1e-4, ["--tol", "1"])


def test_unknown_options_before_double_dash_are_usage_errors(tmp_path):
    script = write_script(tmp_path, ARGV_SCRIPT)
    for args in (["compile", str(script), "--lr", "0.1"], ["profile", str(script), "--iter", "2"],
                 ["narrow", str(script), "--in"], ["check-accuracy", str(script), "data.txt"]):
        proc = kernel_lens(*args)
        assert proc.returncode == 2, (args, proc.stderr[-2000:])
        assert "unrecognized arguments" in proc.stderr and "SCRIPT -- SCRIPT_ARGS" in proc.stderr
    assert not (tmp_path / "argv.json").exists(), "the script never ran"


PROGRESS = """
import sys, time, torch

def f(x):
    return torch.relu(x) * 2

def g(x):
    return torch.tanh(x) + 1

torch.compile(f, backend="lens")(torch.randn(8))
time.sleep(2)
print("SCRIPT: between graphs", file=sys.stderr, flush=True)
torch.compile(g, backend="lens")(torch.randn(8))
"""


def test_compile_reports_graphs_as_they_land_and_where_its_outputs_go(tmp_path):
    script = write_script(tmp_path, PROGRESS)
    proc = kernel_lens("compile", str(script))
    assert proc.returncode == 0, proc.stderr[-2000:]
    err, out = proc.stderr, proc.stdout
    first = err.index("kernel-lens: compiled graph_0 (inference); 1 graph(s) so far")
    second = err.index("kernel-lens: compiled graph_1 (inference); 2 graph(s) so far")
    assert first < err.index("SCRIPT: between graphs") < second  # live, not at the end
    (run,) = tmp_path.glob("torch_compile_debug/run_*")
    start, end = out.split("running " + str(script))[1], out.split(f"debug directory: {run}")[1]
    assert f"debug directory: {tmp_path / 'torch_compile_debug'}/run_*/" in start
    assert f"TORCH_TRACE:     {tmp_path / 'torch_trace'}/" in start and "compile_error.json" in start
    assert end.startswith(" (2 graph folder(s))")
    assert f"TORCH_TRACE: {tmp_path / 'torch_trace'} (1 new log(s): " in end


INDUCTOR = """
import torch


@torch.compile
def f(x):
    return torch.relu(x) * 3


print("SCRIPT:", f(torch.ones(4, 4)).sum().item())
"""


def test_compile_writes_inductors_debug_folder_on_a_warm_cache_too(tmp_path):
    script = write_script(tmp_path, INDUCTOR)
    cache = tmp_path / "inductor_cache"  # this test's own Inductor cache: cold at the first run, warm at the second
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    for attempt in ("cold", "warm"):
        before = set(tmp_path.glob("torch_compile_debug/run_*"))
        proc = subprocess.run([sys.executable, "-m", "compiler", "compile", str(script)], capture_output=True,
                              text=True, cwd=tmp_path, timeout=600, env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        (run,) = set(tmp_path.glob("torch_compile_debug/run_*")) - before
        assert list(run.glob("torchinductor/*/output_code.py")), f"{attempt} run wrote no graph folder"
        assert "(1 graph folder(s))" in proc.stdout and "compiled nothing" not in proc.stdout
    assert any(cache.iterdir())  # the cache was there to hit (Inductor's other caches still fill it)


def test_compile_says_when_a_script_compiled_nothing(tmp_path):
    script = write_script(tmp_path, "print('no torch.compile here')\n")
    proc = kernel_lens("compile", str(script), cwd=tmp_path)
    assert proc.returncode == 0 and "the script compiled nothing" in proc.stdout


ORDER = """
import torch

f = torch.compile(lambda x: x * 2 + 1, backend="lens")
for n in (4, 6, 9):
    f(torch.ones(n))
    print(f"SCRIPT: called with {n}")
"""


def on_a_terminal(args: list[str], cwd) -> tuple[int, str]:
    """Run a command with a terminal as its stdout and stderr (the script's prints are line-buffered, as a user
    sees them): its exit code and everything it wrote."""
    import pty
    master, slave = pty.openpty()
    proc = subprocess.Popen(args, stdout=slave, stderr=slave, cwd=cwd)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the terminal closed: the command and its children are done
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=600), b"".join(chunks).decode(errors="replace")


def test_each_graph_is_reported_before_what_the_script_printed_after_its_call(tmp_path):
    script = write_script(tmp_path, ORDER)
    # the second run builds nothing (g++'s cache is warm): its graphs land milliseconds before the script prints
    for _ in range(2):
        code, out = on_a_terminal([sys.executable, "-m", "compiler", "compile", str(script)], tmp_path)
        assert code == 0, out[-2000:]
        lines = out.splitlines()
        at = {text: lines.index(next(ln for ln in lines if text in ln)) for text in (
            "compiled graph_0 (inference)", "SCRIPT: called with 4", "compiled graph_1 (inference)",
            "SCRIPT: called with 6", "SCRIPT: called with 9")}
        assert list(at.values()) == sorted(at.values()), lines  # was: a graph's line after the script's
