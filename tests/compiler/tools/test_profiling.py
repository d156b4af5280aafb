"""Per-kernel times from torch.profiler: extern kernels that call the same aten op each get their own calls."""
import pytest
import torch

from compiler.tools.profiling import kernel_times

KINDS = {"extern_buf0_mm": "extern", "extern_buf1_mm": "extern"}
EXTERNS = {"extern_buf0_mm": "aten::mm", "extern_buf1_mm": "aten::mm"}


def profiled(calls, iters: int = 4) -> torch.profiler.profile:
    sched = torch.profiler.schedule(wait=0, warmup=1, active=iters, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched) as prof:
        for _ in range(iters + 1):
            calls()
            prof.step()
    return prof


def test_extern_kernels_sharing_an_op_are_timed_by_their_own_calls():
    big, small = torch.randn(384, 384), torch.randn(16, 16)
    prof = profiled(lambda: (torch.mm(big, big), torch.mm(small, small)))
    rows, cats = kernel_times(prof, KINDS, EXTERNS, 4, 1.0)
    ms = {r.name: r.total_ms for r in rows}
    assert [r.calls for r in rows] == [1, 1]
    # each kernel gets the profiled calls at its own position in program order (not an even share of the op's
    # time): compared with the events themselves, so the check does not depend on how fast the machine is
    outer = [e for e in prof.events() if e.name == "aten::mm" and getattr(e.cpu_parent, "name", None) != "aten::mm"]
    mms = sorted(outer, key=lambda e: e.time_range.start)
    assert len(mms) == 8
    for i, name in enumerate(["extern_buf0_mm", "extern_buf1_mm"]):
        assert ms[name] == pytest.approx(sum(e.cpu_time_total for e in mms[i::2]) / 1000 / 4)
    assert ms["extern_buf0_mm"] != ms["extern_buf1_mm"]
    assert [r.total_ms for r in rows] == sorted(ms.values(), reverse=True)
    assert cats[0].total_ms == pytest.approx(sum(ms.values()))


def test_calls_that_do_not_fit_the_kernels_share_the_op_evenly():
    a = torch.randn(64, 64)
    prof = profiled(lambda: (torch.mm(a, a), torch.mm(a, a), torch.mm(a, a)))  # 3 calls, 2 kernels
    rows, _ = kernel_times(prof, KINDS, EXTERNS, 4, 1.0)
    assert rows[0].total_ms == rows[1].total_ms > 0


def test_an_extern_view_counts_its_own_call_not_those_other_ops_make():
    """An extern `as_strided` (a view generated code calls) is one call a step: the `aten::as_strided` calls ATen's
    own ops make inside them (a transpose's) are theirs, not the kernel's (they made GhostNet's one view 14 calls
    and 6% of its step)."""
    a = torch.randn(64, 64)
    prof = profiled(lambda: (torch.as_strided(a, (32, 32), (1, 64)), [a.t() for _ in range(5)], a.transpose(0, 1)))
    rows, _ = kernel_times(prof, {"extern_buf0_as_strided": "extern"}, {"extern_buf0_as_strided": "aten::as_strided"},
                           4, 1.0)
    (row,) = rows
    nested = [e for e in prof.events() if e.name == "aten::as_strided" and e.cpu_parent is not None
              and "::" in e.cpu_parent.name]
    assert len(nested) >= 4 * 6  # (the transposes' own views: what the kernel's count must leave out)
    assert row.calls == 1


TRAINING = """
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
step = torch.compile(opt.step, backend="lens")
x, y = torch.randn(16, 32), torch.randn(16, 8)


@torch.compile(backend="lens")
def loss_fn(x, y):
    return torch.nn.functional.mse_loss(model(x), y)


for i in range(2):
    opt.zero_grad()
    loss = loss_fn(x, y)
    loss.backward()
    step()
print("weight sum", repr(model[0].weight.sum().item()))
"""


def test_profile_times_every_graph_of_a_training_iteration(tmp_path):
    """forward, backward and the optimizer step's graphs each get a profile; the progress line's speedup is the
    table's; without a terminal no kernel name or path is cut; the step's parameters end as without profiling."""
    import json
    import pathlib
    import subprocess
    import sys
    prog = tmp_path / "train.py"
    prog.write_text(TRAINING)
    plain = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    proc = subprocess.run([sys.executable, "-m", "compiler", "profile", str(prog), "--warmup", "1", "--iters", "3"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr[-2000:]
    (run,) = tmp_path.glob("torch_compile_debug/run_*")
    kinds = {g.name: json.loads((g / "kernel_map.json").read_text())["graph_kind"]
             for g in sorted((run / "lens").glob("graph_*"))}
    assert sorted(kinds.values()) == ["backward", "forward", "inference", "inference"]  # 2 step graphs
    for graph, kind in kinds.items():
        path = run / "lens" / graph / "profile.json"
        assert path.exists(), f"{graph} ({kind}) has no profile.json:\n{out}"
        profile = json.loads(path.read_text())
        assert profile["eager_ms"] > 0 and profile["compiled_ms"] > 0
        line = next(ln for ln in out.splitlines() if ln.startswith(f"kernel-lens profile: {graph} ({kind}):"))
        assert line.endswith(f"speedup {profile['speedup']:.2f}x")  # was "speedup n/a"
        assert f"{graph} ({kind}): eager" in out  # the table's title
        assert f"  {path}" in out.splitlines()  # the path whole, on its own line
        for k in profile["kernels"]:
            assert f" {k['name']} " in out  # no name cut into look-alike rows
    assert "not profiled" not in out
    weight = next(ln for ln in plain.stdout.splitlines() if ln.startswith("weight sum"))
    assert weight in out.splitlines()


CONV_NET = """
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
                            torch.nn.Conv2d(16, 16, 3, padding=1, groups=16), torch.nn.Hardswish(),
                            torch.nn.Conv2d(16, 8, 1)).eval()
f = torch.compile(model, backend="lens")
x = torch.randn(2, 3, 24, 24)
with torch.no_grad():
    for _ in range(2):
        f(x)
"""


def test_packed_convolutions_are_timed_as_the_calls_they_make(tmp_path):
    """A frozen conv net's convolutions run through lens.conv2d_onednn's kernel, called directly (the profiler sees
    oneDNN's op): each extern convolution gets its one call a step and a time, not 0 calls."""
    import json
    import subprocess
    import sys
    prog = tmp_path / "convs.py"
    prog.write_text(CONV_NET)
    proc = subprocess.run([sys.executable, "-m", "compiler", "profile", str(prog), "--warmup", "1", "--iters", "3"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    (path,) = tmp_path.glob("torch_compile_debug/run_*/lens/graph_*/profile.json")
    convs = [k for k in json.loads(path.read_text())["kernels"] if k["name"].endswith("conv2d_onednn")]
    assert len(convs) == 3, convs
    assert all(k["calls"] == 1 and k["total_ms"] > 0 for k in convs), convs
