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
