"""PyTorch's own CPU benchmark suites under lens (issue 49): models of `benchmarks/dynamo/timm_models_list_cpu.txt` and
`huggingface_models_list_cpu.txt` (pytorch/pytorch), random weights, batch 1, each model in a process of its own with a
timeout; the backends compiled and then timed interleaved in that process, in one of three modes
(benchmarks/suite_modes.py): `infer` (fp32 under no_grad: eager, Inductor, Inductor with `freezing`, lens), `bf16`
(bf16 autocast inference: eager, Inductor with freezing, lens) or `train` (a step: forward, loss, backward, SGD or
AdamW: eager, Inductor default, lens).

Per model and backend: the first call (compile) and the backend's own share of it (its graph compiler on aten graphs,
after Dynamo and AOTAutograd: benchmarks/backend_compile_time.py), the median of the timed calls, accuracy as PyTorch's
harness judges it (`torch._dynamo.utils.same` against a float64 run; training: the parameters after 2 steps), a
profiler pass splitting lens's and the baseline's step into GEMM/convolution calls, other ATen calls and the rest
(generated kernels and glue), the share of graph nodes lens generated code for, and how many graphs lens ran eagerly.
`--cpu-time` times each call by the calling thread's CPU time (with `--threads 1`: robust on a shared machine).
Each model's process gets fresh lens and Inductor caches (lens keeps its toolchain builds; `--warm`: the user's), and
each backend compiles a small function first (its once-per-process costs are not the model's).

Usage: python benchmarks/suite_bench.py [--mode infer|bf16|train] [--suite timm|hf|blocks|all] [--models a,b]
       [--threads 2] [--reps 20] [--timeout 900] [--backends ...] [--optimizer sgd|adamw] [--cpu-time] [--tiny]
       [--warm] [--json out.jsonl]
timm needs torchvision's op schemas where PyPI's torchvision cannot load beside a CPU torch
(benchmarks/torchvision_schemas.py, installed before timm is imported). `--tiny` shrinks every model (CI's
correctness subset: tests/benchmarks/test_suite_bench.py). Tables: benchmarks/suite_report.py.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import backend_compile_time
import suite_modes
import suite_report
from suite_models import SUITES, build
from suite_modes import MODES, Runner


@dataclass
class ModelResult:
    suite: str
    name: str
    mode: str = "infer"
    status: str = "ok"  # ok | build failed | timeout | crashed | <backend> raised
    error: str = ""
    first_call_s: dict[str, float] = field(default_factory=dict)
    backend_compile_s: dict[str, float] = field(default_factory=dict)  # inside the graph compiler, of the first call
    median_ms: dict[str, float] = field(default_factory=dict)
    accurate: dict[str, bool] = field(default_factory=dict)
    split_ms: dict[str, dict[str, float]] = field(default_factory=dict)  # backend -> gemm_conv/other_aten/generated
    lens_native_share: float | None = None  # nodes in generated kernels / nodes placed (suite_modes.native_share)
    lens_eager_graphs: int = 0


def _warm_up(backends: list[str]) -> None:
    """Each graph compiler's once-per-process costs (imports, toolchain probes, Inductor's compile workers and its
    headers) paid on a small function first, so that a first call of the model is its own graphs' compile."""
    import torch
    x = torch.randn(8, 8)
    for backend in dict.fromkeys(b if b != "inductor_freezing" else "inductor" for b in backends if b != "eager"):
        torch.compile(lambda t: (t * 2 + 1).sum(-1), backend=backend)(x)


def _first_call(runner: Runner) -> tuple[float, float | None, object]:
    """(wall s of the first step, s inside the backend's graph compiler, the step's output)."""
    backend_compile_time.reset()
    gc.collect()
    start = time.perf_counter()
    out = runner.step()
    first = time.perf_counter() - start
    key = backend_compile_time.backend_key(runner.backend)
    inside = backend_compile_time.BACKEND_MS.get(key) if key else None
    return first, (inside / 1e3 if inside is not None else None), out


def run_one(suite: str, name: str, mode_name: str, backends: list[str], reps: int, cpu_time: bool, tiny: bool,
            optimizer: str = "sgd") -> ModelResult:
    import torch

    mode, result = MODES[mode_name], ModelResult(suite, name, mode_name)
    # eager's run is the accuracy reference; the baseline compiles before the other backends, whose compiled kernels
    # it would otherwise find in Inductor's caches (Inductor default and with freezing share most kernels)
    leading = ["eager", *([mode.baseline] if mode.baseline in backends else [])]
    backends = leading + [b for b in backends if b not in leading]
    try:
        model, inputs = build(suite, name, tiny)
    except Exception as e:  # noqa: BLE001 (a model this environment cannot build: reported, not timed)
        result.status, result.error = "build failed", f"{type(e).__name__}: {e}"[:300]
        return result
    backend_compile_time.install()
    torch._dynamo.config.cache_size_limit = 64  # (each backend compiles its own copy of the same forward)
    with suite_modes.freezing_flag(mode, backends):
        return _compile_and_time(mode, result, model, inputs, backends, reps, cpu_time, optimizer)


def _compile_and_time(mode, result: ModelResult, model, inputs, backends: list[str], reps: int, cpu_time: bool,
                      optimizer: str) -> ModelResult:
    from compiler import pipeline
    try:
        fp64 = suite_modes.fp64_reference(mode, model, inputs, optimizer)
    except Exception:  # noqa: BLE001 (the harness's rule: no float64 reference where the model cannot run in
        fp64 = None  # float64, e.g. XGLM's finfo(float64).min into a float32 tensor; accuracy is then tol alone)
    _warm_up(backends)
    runners, ref = {}, None
    for backend in backends:
        compiled_before, eager_before = len(pipeline.COMPILED), len(pipeline.EAGER)
        try:
            runner = Runner(mode, backend, model, inputs, optimizer)
            first, inside, out = _first_call(runner)
            got = runner.results(out)
        except Exception as e:  # noqa: BLE001 (a backend that raises: the model's status says which)
            result.status, result.error = f"{backend} raised", f"{type(e).__name__}: {e}"[:300]
            if backend == "eager":
                return result
            continue
        result.first_call_s[backend] = round(first, 3)
        if inside is not None:
            result.backend_compile_s[backend] = round(inside, 3)
        ref = got if ref is None else ref
        result.accurate[backend] = suite_modes.accurate(ref, got, fp64, mode.tol)
        if backend == "lens":
            result.lens_native_share = suite_modes.native_share(pipeline.COMPILED[compiled_before:])
            result.lens_eager_graphs = len(pipeline.EAGER) - eager_before
        runners[backend] = runner
    clock = time.thread_time if cpu_time else time.perf_counter
    times: dict[str, list[float]] = {b: [] for b in runners}
    for _ in range(reps):
        for backend, runner in runners.items():
            start = clock()
            runner.step()
            times[backend].append(clock() - start)
    result.median_ms = {b: round(statistics.median(t) * 1e3, 3) for b, t in times.items()}
    for backend in ("lens", mode.baseline):
        if backend in runners:
            result.split_ms[backend] = suite_modes.profile_split(runners[backend].step)
    return result


def _cold_caches(tmp: str) -> dict[str, str]:
    """Environment for a model's process: empty lens and Inductor caches in `tmp`, lens's toolchain builds (its
    precompiled prelude, built once per g++) copied in, so that a first call compiles every graph (compiler_bench's
    "pch" phase)."""
    from compiler import config
    lens_dir = os.path.join(tmp, "lens")
    for kind in ("pch", "prebuilt"):
        if os.path.isdir(os.path.join(config.cache_dir(), kind)):
            shutil.copytree(os.path.join(config.cache_dir(), kind), os.path.join(lens_dir, kind))
    return {"LENS_CACHE_DIR": lens_dir, "TORCHINDUCTOR_CACHE_DIR": os.path.join(tmp, "inductor")}


def run_isolated(suite: str, name: str, args) -> ModelResult:
    """One model in a process of its own (a crash or a hang costs that model only)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--one", name, "--suite", suite, "--mode", args.mode,
           "--reps", str(args.reps), "--threads", str(args.threads), "--backends", ",".join(args.backends),
           "--optimizer", args.optimizer]
    cmd += ["--cpu-time"] if args.cpu_time else []
    cmd += ["--tiny"] if args.tiny else []
    with tempfile.TemporaryDirectory(prefix="suite-bench-") as tmp:
        env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), **({} if args.warm else _cold_caches(tmp))}
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env,
                                  check=False)
        except subprocess.TimeoutExpired:
            return ModelResult(suite, name, args.mode, status="timeout", error=f"over {args.timeout} s")
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            return ModelResult(**json.loads(line[len("RESULT "):]))
    return ModelResult(suite, name, args.mode, status="crashed",
                       error=f"exit {proc.returncode}: {proc.stderr[-300:]}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=tuple(MODES), default="infer")
    parser.add_argument("--suite", choices=(*SUITES, "all"), default="all")
    parser.add_argument("--models", default="", help="comma-separated names (default: the suite's whole list)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--timeout", type=int, default=900)
    parser.add_argument("--backends", default="", help="comma-separated (default: the mode's, suite_modes.MODES)")
    parser.add_argument("--optimizer", choices=("sgd", "adamw"), default="sgd")
    parser.add_argument("--cpu-time", action="store_true")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--warm", action="store_true", help="keep the user's lens and Inductor caches")
    parser.add_argument("--json", default="")
    parser.add_argument("--report", default="", help="print the tables of a --json file's results, one per mode")
    parser.add_argument("--one", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.backends = [b for b in args.backends.split(",") if b] or list(MODES[args.mode].backends)
    if args.report:
        with open(args.report) as f:
            results = [ModelResult(**json.loads(line)) for line in f if line.strip()]
        for mode in dict.fromkeys(r.mode for r in results):
            print(f"{mode}:\n" + suite_report.table([r for r in results if r.mode == mode], MODES[mode]) + "\n")
        return 0
    if args.one:
        import torch
        torch.set_num_threads(args.threads)
        result = run_one(args.suite, args.one, args.mode, args.backends, args.reps, args.cpu_time, args.tiny,
                         args.optimizer)
        print("RESULT " + json.dumps(asdict(result)), flush=True)
        return 0
    suites = ("timm", "hf") if args.suite == "all" else (args.suite,)
    wanted = [m for m in args.models.split(",") if m]
    results = []
    for suite in suites:
        names = SUITES[suite]
        for name in [m for m in wanted if m in names or suite == args.suite] if wanted else names:
            result = run_isolated(suite, name, args)
            print(json.dumps(asdict(result)), flush=True)
            results.append(result)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(asdict(result)) + "\n")
    print(suite_report.table(results, MODES[args.mode]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
