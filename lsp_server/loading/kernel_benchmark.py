"""Benchmark one Triton kernel on this machine's GPU (issue 47, the seed's "Benchmark Individual Triton Kernel"):
run the kernel's standalone module — the text Inductor embeds in output_code.py between
`<name> = async_compile.triton('<name>', '''` and its closing `'''`, the same as the kernel's own file, with its
`get_args()` and timing `__main__` when compiled with TORCHINDUCTOR_BENCHMARK_KERNEL=1 — as compiled (`default`)
and as max-autotune would have compiled it (`max_autotune`), and print both as JSON; `--record` also keeps the
result in `kernel_benchmarks.json` beside output_code.py, where the editor shows it on a machine without a GPU.

The max-autotune variant runs with TORCHINDUCTOR_MAX_AUTOTUNE=1 and with the kernel's `inductor_meta` switched
the way `mode="max-autotune"` compiles it (`max_autotune` and `coordinate_descent_tuning` on): Inductor bakes
`inductor_meta` into the kernel's text at compile time and its autotuner reads that, not the environment, so the
variable alone changes nothing (the `env_max_autotune` variant measures exactly that).

    python -m lsp_server.loading.kernel_benchmark OUTPUT_CODE KERNEL [--variants default,max_autotune] [--record]

Each variant runs in a fresh process and a folder of its own (its autotune cache beside the file is its own);
TORCH_LOGS makes the Triton heuristics log the configs it benchmarked. The server runs this module as a process;
it never imports the kernel."""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from lsp_server.parsers.autotune_log import parse_autotune_log
from lsp_server.parsers.kernel_bench import (
    KERNEL_BENCHMARKS_FILE,
    KernelBenchmarks,
    VariantTiming,
    parse_kernel_benchmarks,
    parse_standalone,
)

VARIANTS = ("default", "max_autotune")
ALL_VARIANTS = ("default", "env_max_autotune", "max_autotune")
HEURISTICS_LOG = "+torch._inductor.runtime.triton_heuristics"
CLOSING = "''', device_str="
MAX_AUTOTUNE_META = "'max_autotune': False"
COORDESC_META = ("'coordinate_descent_tuning': True, 'coordinate_descent_search_radius': 1, "
                 "'coordinate_descent_check_all_directions': False, ")
HARNESS = "if __name__ == '__main__':"
TIMEOUT_S = 240


class NoStandaloneModule(ValueError):
    """output_code.py holds no runnable text for the kernel (another name, or compiled without the harness)."""


def standalone_text(output_code: str, kernel: str) -> str:
    """The kernel's standalone module, as output_code.py embeds it."""
    lines = output_code.splitlines()
    opening = f"{kernel} = async_compile.triton('{kernel}', '''"
    start = next((n for n, text in enumerate(lines) if text.startswith(opening)), None)
    if start is None:
        raise NoStandaloneModule(f"output_code.py defines no Triton kernel `{kernel}`")
    end = next((n for n in range(start + 1, len(lines)) if lines[n].startswith(CLOSING)), None)
    body = lines[start + 1:end]
    if end is None or HARNESS not in body:
        raise NoStandaloneModule(f"`{kernel}` was compiled without its benchmark harness: compile with "
                                 f"TORCHINDUCTOR_BENCHMARK_KERNEL=1 (`kernel-lens profile-inductor` does)")
    return "\n".join(lines[start].split("'''", 1)[1:] + body) + "\n"


def max_autotune_text(text: str) -> str:
    """The module as `mode="max-autotune"` would have compiled the kernel: max_autotune and coordinate descent on
    in its inductor_meta (already on: unchanged)."""
    if MAX_AUTOTUNE_META in text:
        text = text.replace(MAX_AUTOTUNE_META, "'max_autotune': True")
    if "'coordinate_descent_tuning': True" not in text:
        text = text.replace("'max_autotune': True, ", "'max_autotune': True, " + COORDESC_META, 1)
    return text


def variant_run(text: str, variant: str) -> tuple[str, dict[str, str]]:
    """(module text, extra environment) of a variant."""
    if variant == "default":
        return text, {}
    if variant == "env_max_autotune":
        return text, {"TORCHINDUCTOR_MAX_AUTOTUNE": "1"}
    if variant == "max_autotune":
        return max_autotune_text(text), {"TORCHINDUCTOR_MAX_AUTOTUNE": "1"}
    raise ValueError(f"unknown variant {variant!r} (one of {', '.join(ALL_VARIANTS)})")


def run_variant(text: str, kernel: str, variant: str, timeout: int = TIMEOUT_S) -> VariantTiming:
    module, extra = variant_run(text, variant)
    with tempfile.TemporaryDirectory(prefix=f"kernel_lens_{variant}_") as folder:
        path = Path(folder) / f"{kernel}.py"
        path.write_text(module)
        env = {**os.environ, **extra, "TORCH_LOGS": HEURISTICS_LOG, "PYTHONUNBUFFERED": "1"}
        try:
            done = subprocess.run([sys.executable, str(path)], check=False, cwd=folder, env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return VariantTiming(variant, None, None, None, error=f"ran past {timeout} s")
    timing = parse_standalone(done.stdout)
    if done.returncode != 0 or timing is None:
        return VariantTiming(variant, None, None, None, error=f"exit {done.returncode}: "
                             + (done.stderr or done.stdout)[-400:].strip())
    log = parse_autotune_log(done.stderr)
    tuned = log.kernels.get(kernel)
    search = log.coordesc[-1] if log.coordesc else None
    tried = (len(tuned.tried) if tuned else 0) + (len(search.tried) if search else 0)
    best = search.best if search and search.best else (tuned.best.config if tuned and tuned.best else None)
    return VariantTiming(variant, *timing, configs_tried=tried or None, best_config=best)


def device_name() -> str | None:
    try:
        done = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.get_device_name(0))"], check=False,
                              capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def benchmark(output_code: Path, kernel: str, variants: tuple[str, ...] = VARIANTS) -> KernelBenchmarks:
    text = standalone_text(output_code.read_text(encoding="utf-8", errors="replace"), kernel)
    return KernelBenchmarks(kernel, device_name(), [run_variant(text, kernel, v) for v in variants])


def record(graph_dir: Path, result: KernelBenchmarks) -> Path:
    """Keep `result` in the graph's kernel_benchmarks.json (other kernels' records stay)."""
    path = graph_dir / KERNEL_BENCHMARKS_FILE
    kept = parse_kernel_benchmarks(path.read_text(encoding="utf-8")) if path.is_file() else {}
    kept[result.kernel] = result
    path.write_text(json.dumps({"kernels": {name: as_json(r) for name, r in sorted(kept.items())}}, indent=1) + "\n")
    return path


def as_json(result: KernelBenchmarks) -> dict:
    return {"device": result.device, "variants": [asdict(v) for v in result.variants]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output_code", type=Path)
    parser.add_argument("kernel")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"of {', '.join(ALL_VARIANTS)}")
    parser.add_argument("--record", action="store_true", help=f"keep the result in {KERNEL_BENCHMARKS_FILE}")
    args = parser.parse_args(argv)
    variants = tuple(v for v in re.split(r"[,\s]+", args.variants) if v)
    try:
        for variant in variants:
            variant_run("", variant)
        result = benchmark(args.output_code, args.kernel, variants)
    except (NoStandaloneModule, ValueError, OSError) as error:
        print(json.dumps({"kernel": args.kernel, "error": str(error)}))
        return 2
    if args.record:
        record(args.output_code.parent, result)
    print(json.dumps({"kernel": args.kernel, **as_json(result)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
