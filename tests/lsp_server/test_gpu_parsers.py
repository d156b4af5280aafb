"""The issue-47 parsers on the committed H100 files: Triton cache entries and their location records, the
profiler trace of the user's loop, Inductor's autotune logs, `output_code.py -k` lines."""
from __future__ import annotations

import json
import re
from pathlib import Path

from lsp_server.parsers.autotune_log import parse_autotune_log
from lsp_server.parsers.kernel_bench import kernel_key, parse_kernel_bench
from lsp_server.parsers.profiler_trace import parse_profiler_trace, read_profiler_trace
from lsp_server.parsers.triton_cache import parse_res_usage, read_cache, stage_lines

TRAIN = Path(__file__).resolve().parents[1] / "fixtures" / "inductor_gpu_train" / "transformer_train"
GEMM = TRAIN.parent / "autotune_gemm"
CACHE = next(TRAIN.glob("torch_compile_debug/run_*/triton_cache"))
GELU = "triton_poi_fused_gelu_view_7"


def kernel_file_lines(entry) -> list[str]:
    """The kernel's own file, found in the fixture's inductor_cache by the name its TTIR's loc records give."""
    (named,) = set(re.findall(r'loc\("([^"]+\.py)":', entry.stage_path("ttir").read_text()))
    return (TRAIN / "inductor_cache" / Path(named).parent.name / Path(named).name).read_text().splitlines()


def test_cache_entries_metadata_and_resource_usage():
    entries = read_cache(CACHE)
    on_disk = {p.parent.name for p in CACHE.glob("*/*.json") if not p.name.startswith("__grp__")}
    assert {e.key for es in entries.values() for e in es} == on_disk
    for entry in (e for es in entries.values() for e in es):
        meta = json.loads((entry.folder / f"{entry.name}.json").read_text())
        assert (entry.num_warps, entry.num_stages, entry.shared) == \
            (meta["num_warps"], meta["num_stages"], meta["shared"])
        text = (entry.folder / f"{entry.name}.res_usage.txt").read_text()
        assert f"REG:{entry.usage.registers} " in text and f"STACK:{entry.usage.stack} " in text
    assert parse_res_usage("Resource usage:\n Function other:\n  REG:4 STACK:0\n", "mine") is None


def test_every_stage_maps_lines_to_the_kernel_files_lines_that_hold_code():
    """Each located line of each stage names a line of the kernel's own file that is a statement of its body
    (never blank, never the decorator), and every stage reaches the kernel's store line."""
    (entry,) = [e for e in read_cache(CACHE)[GELU] if e.stages]
    source = kernel_file_lines(entry)
    body = next(i for i, text in enumerate(source, start=1) if text.startswith(f"def {GELU}("))
    store = next(i for i, text in enumerate(source, start=1) if "tl.store(" in text)
    for stage in ("ttir", "ttgir", "llir", "ptx", "sass"):
        located = stage_lines(entry.stage_path(stage).read_text(), stage)
        mine = [s for s in located
                if s.source_file is None or s.source_file.endswith(".py") and "/triton/" not in s.source_file]
        assert mine, stage
        assert all(body <= s.source_line <= len(source) and source[s.source_line - 1].strip() for s in mine), stage
        assert store in {s.source_line for s in mine}, stage


def test_ptx_and_sass_lines_are_instructions():
    (entry,) = [e for e in read_cache(CACHE)[GELU] if e.stages]
    for stage, instruction in (("ptx", re.compile(r"^\s+[a-z@]")), ("sass", re.compile(r"^\s+/\*[0-9a-f]{4}\*/"))):
        text = entry.stage_path(stage).read_text().splitlines()
        assert all(instruction.match(text[s.line - 1]) for s in stage_lines("\n".join(text), stage)), stage


def test_profiler_trace_kernels_know_the_op_that_launched_them():
    (path,) = TRAIN.glob("profiler_traces/*.pt.trace.json")
    trace = read_profiler_trace(path)
    events = json.loads(path.read_text())["traceEvents"]
    assert len(trace.kernels) == sum(1 for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    assert trace.device_name == "NVIDIA H100 80GB HBM3" and len(trace.steps) == 2
    triton = [k for k in trace.kernels if k.name.startswith("triton_")]
    assert triton and all(k.launcher == k.name for k in triton)  # Inductor's record function names the kernel
    assert {k.launcher for k in trace.kernels if not k.name.startswith("triton_")} >= {"aten::mm", "aten::bmm"}
    assert len(trace.calls) == 6  # forward, backward, optimizer: two steps each
    assert all(k in trace.kernels for call in trace.calls for k in call.kernels)
    assert 0 < trace.busy_percent() < 100
    assert parse_profiler_trace("{").problem.startswith("not JSON")


def test_autotune_log_configs_and_the_best_one():
    log = parse_autotune_log((TRAIN / "prog_stderr.txt").read_text())
    stderr = (TRAIN / "prog_stderr.txt").read_text()
    assert set(log.kernels) == set(re.findall(r"Benchmark all input configs for (\w+), get:", stderr))
    tuned = log.kernels["triton_per_fused_add_embedding_native_layer_norm_0"]
    assert len(tuned.tried) == 3 and tuned.best == min(tuned.tried, key=lambda t: t.ms)
    gemm = parse_autotune_log((GEMM / "prog_stderr.txt").read_text()).gemms
    assert [(g.op, g.sizes) for g in gemm] == [("mm", "2048x1024, 1024x768")]
    assert gemm[0].chosen.name == "mm" and gemm[0].chosen.percent == 100.0
    assert [c.ms for c in gemm[0].choices] == sorted(c.ms for c in gemm[0].choices)


def test_kernel_bench_lines_match_kernels_through_their_kernel_path():
    graph = next(TRAIN.glob("torch_compile_debug/run_*/torchinductor/model__0_forward_1.0"))
    code = (graph / "output_code.py").read_text().splitlines()
    benches = parse_kernel_bench((graph / "benchmark_kernels.txt").read_text())
    starts = [i + 1 for i, text in enumerate(code) if re.match(r"^def triton_\w+\(", text)]
    keys = {kernel_key(code, start) for start in starts}
    assert keys == set(benches) and len(keys) == len(starts)
