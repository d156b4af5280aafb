"""Benchmark one kernel (issue 47): the standalone module `python -m lsp_server.loading.kernel_benchmark` runs is
the kernel's own file, the max-autotune variant differs from it only in the baked `inductor_meta`, each variant's
timing line and autotuning log are read back, and results are kept in kernel_benchmarks.json; and the parsers
under it on the committed H100 logs (coordinate descent's searches, TORCH_TRACE's triton_kernel_info)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lsp_server.loading import kernel_benchmark
from lsp_server.loading.kernel_benchmark import (
    NoStandaloneModule,
    max_autotune_text,
    record,
    run_variant,
    standalone_text,
)
from lsp_server.parsers.autotune_log import parse_autotune_log, parse_kernel_info
from lsp_server.parsers.kernel_bench import (
    KernelBenchmarks,
    VariantTiming,
    kernel_path,
    parse_kernel_benchmarks,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TRAIN = FIXTURES / "inductor_gpu_train" / "transformer_train"
GEMM = FIXTURES / "inductor_gpu_train" / "autotune_gemm"
GELU = "triton_poi_fused_gelu_view_7"


def forward_code() -> Path:
    return next(TRAIN.glob("torch_compile_debug/run_*/torchinductor/model__0_forward_1.0/output_code.py"))


def test_the_standalone_module_is_the_kernels_own_file():
    code = forward_code().read_text()
    lines = code.splitlines()
    own = Path(kernel_path(lines, next(i for i, t in enumerate(lines, 1) if t.startswith(f"def {GELU}("))))
    assert standalone_text(code, GELU) == (TRAIN / "inductor_cache" / own.parent.name / own.name).read_text()
    with pytest.raises(NoStandaloneModule, match="defines no Triton kernel `triton_nope`"):
        standalone_text(code, "triton_nope")
    without_harness = code.replace("if __name__ == '__main__':", "if False:")
    with pytest.raises(NoStandaloneModule, match="TORCHINDUCTOR_BENCHMARK_KERNEL=1"):
        standalone_text(without_harness, GELU)


def test_the_max_autotune_variant_changes_only_the_baked_inductor_meta():
    text = standalone_text(forward_code().read_text(), GELU)
    patched = max_autotune_text(text)
    changed = [(a, b) for a, b in zip(text.splitlines(), patched.splitlines()) if a != b]
    assert len(text.splitlines()) == len(patched.splitlines()) and len(changed) == 1
    before, after = changed[0]
    assert before.lstrip().startswith("inductor_meta=") and "'max_autotune': False" in before
    assert "'max_autotune': True, 'coordinate_descent_tuning': True" in after and "coordinate_descent" not in before
    # a kernel max-autotune already compiled is left as it is
    gemm = next(GEMM.glob("torch_compile_debug/run_*/torchinductor/model__0_inference_0.0/output_code.py"))
    name = re.search(r"^def (triton_per_\w+)\(", gemm.read_text(), re.MULTILINE)[1]
    tuned = standalone_text(gemm.read_text(), name)
    assert max_autotune_text(tuned) == tuned


def test_a_variant_runs_in_its_own_process_and_its_timing_and_search_are_read(tmp_path: Path):
    """A stand-in module (no GPU here) printing what Inductor's harness and Triton heuristics print."""
    module = ("import os, sys\n"
              "sys.stderr.write('COORDESC: XBLOCK: 4, num_warps: 4, num_ctas: 1, num_stages: 1, maxnreg: None: 0.1, "
              "nreg 20, nspill 0, #shared-mem 0\\n')\n"
              "sys.stderr.write('COORDESC: XBLOCK: 8, num_warps: 4, num_ctas: 1, num_stages: 1, maxnreg: None: 0.09, "
              "nreg 22, nspill 0, #shared-mem 0\\n')\n"
              "sys.stderr.write('Function hash ab12 has best config XBLOCK: 8, num_warps: 4, num_ctas: 1, "
              "num_stages: 1, maxnreg: None\\n')\n"
              "print(os.environ.get('TORCHINDUCTOR_MAX_AUTOTUNE', '0') + '.012ms    0.004GB    333.33GB/s')\n")
    timing = run_variant(module, "k", "max_autotune")
    assert timing == VariantTiming("max_autotune", 1.012, 0.004, 333.33, 2,
                                   "XBLOCK: 8, num_warps: 4, num_ctas: 1, num_stages: 1, maxnreg: None")
    assert run_variant(module, "k", "default").ms == 0.012
    failed = run_variant("raise SystemExit('no CUDA GPU')", "k", "default")
    assert failed.ms is None and failed.error == "exit 1: no CUDA GPU"


def test_results_are_kept_beside_output_code_with_other_kernels_records(tmp_path: Path, capsys):
    first = KernelBenchmarks("a", "GPU", [VariantTiming("default", 0.5, 0.1, 200.0)])
    second = KernelBenchmarks("b", "GPU", [VariantTiming("max_autotune", None, None, None, error="exit 1")])
    record(tmp_path, first)
    path = record(tmp_path, second)
    assert parse_kernel_benchmarks(path.read_text()) == {"a": first, "b": second}
    assert kernel_benchmark.main([str(tmp_path / "output_code.py"), "a", "--variants", "fastest"]) == 2
    assert "unknown variant 'fastest'" in json.loads(capsys.readouterr().out)["error"]
    assert parse_kernel_benchmarks("[1]") == {} and parse_kernel_benchmarks("{") == {}


def test_coordinate_descent_searches_and_kernel_info_on_the_h100_logs():
    stderr = (GEMM / "prog_stderr.txt").read_text()
    searches = parse_autotune_log(stderr).coordesc
    assert len(searches) == stderr.count("has best config") == 3
    assert sum(len(s.tried) for s in searches) == stderr.count("COORDESC: ")
    assert all(s.best_timing is not None and s.best_timing.config == s.best for s in searches)
    (log,) = (FIXTURES / "inductor_gpu" / "softmax").glob("torch_trace/*.log")
    info = parse_kernel_info(log.read_text())
    assert info["triton_red_fused_prepare_softmax_online_1"]["only_config"] == \
        {"R0_BLOCK": 2048, "XBLOCK": 1, "num_warps": 16, "num_stages": 1}
    assert "only_config" not in info["triton_per_fused_prepare_softmax_online_2"]
    clash = '{"artifact": {"name": "triton_kernel_info"}}\n\t{"k": {"only_config": [["XBLOCK", %d]]}}\n'
    assert parse_kernel_info(clash % 1 + clash % 2) == {} and parse_kernel_info(clash % 1)["k"]["only_config"] == \
        {"XBLOCK": 1}
