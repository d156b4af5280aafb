"""Frozen float32 3x3 convolutions, one call each way, timed interleaved in one process: eager's `F.conv2d` over a
channels-last input, oneDNN's direct primitive (compiler/machine/onednn_direct.py, what lens ran before) and
Winograd's F(4x4, 3x3) (compiler/machine/winograd.py), with the ratio Winograd / direct and each result's RMSE
against a float64 convolution. The shapes are the 3x3 layers of ResNet-like nets at batch 1 (224-pixel inputs);
`--all-sizes` also runs the ones winograd.takes refuses (7x7 outputs, few channels), to show why; the large ones
(128x128, 147x147) go in chunks of tiles (winograd.chunk_tiles).

    python benchmarks/conv_bench.py [--threads 1] [--reps 15] [--all-sizes]
"""
from __future__ import annotations

import argparse
import platform
import time

import torch
import torch.nn.functional as F

from compiler.machine import onednn_direct, winograd

# (channels in, spatial size, channels out)
SHAPES = [(64, 56, 64), (96, 56, 96), (128, 28, 128), (256, 28, 256), (192, 14, 192), (256, 14, 256),
          (384, 14, 384), (512, 7, 512), (32, 112, 32), (32, 56, 32), (48, 14, 48), (64, 128, 64), (32, 147, 32)]


def _median_us(fn, reps: int) -> float:
    for _ in range(3):
        fn()
    samples = []
    for _ in range(reps):
        start = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - start)
    return sorted(samples)[len(samples) // 2] / 1e3


def _rmse(got: torch.Tensor, exact: torch.Tensor) -> float:
    return (got.double() - exact).pow(2).mean().sqrt().item()


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def run(shapes, reps: int, every_size: bool) -> list[dict]:
    if not (onednn_direct.available(wait=True) and winograd.available(wait=True)):
        raise SystemExit("the oneDNN or Winograd helper is not there (see their build.log in the cache)")
    rows = [_measure(c, size, k, reps, every_size) for c, size, k in shapes]
    return [r for r in rows if r is not None]


def _measure(c: int, size: int, k: int, reps: int, every_size: bool) -> dict | None:
    g = torch.Generator().manual_seed(c + size + k)
    x = torch.randn(1, c, size, size, generator=g).contiguous(memory_format=torch.channels_last)
    w, b = torch.randn(k, c, 3, 3, generator=g) / (3 * c ** 0.5), torch.randn(k, generator=g)
    args = (list(x.shape), w, torch.float32, [1, 1], [1, 1], [1, 1], 1, "relu", [], "", [1, k, size, size])
    taken = winograd.takes(x.shape, w, [1, 1], [1, 1], 1, args[-1])
    if not taken and not every_size:
        return None
    saved = winograd.MIN_TILES, winograd.MIN_CHANNELS
    winograd.MIN_TILES = winograd.MIN_CHANNELS = 1  # (--all-sizes: made even where the rule refuses it)
    try:
        wino, direct = winograd.Convolution.make(*args), onednn_direct.Convolution.make(*args)
    finally:
        winograd.MIN_TILES, winograd.MIN_CHANNELS = saved
    exact = F.relu(F.conv2d(x.double(), w.double(), b.double(), padding=1))
    times = {"eager": _median_us(lambda: F.relu(F.conv2d(x, w, b, padding=1)), reps),
             "direct": _median_us(lambda: direct.run(x, b), reps),
             "winograd": _median_us(lambda: wino.run(x, b), reps)}
    return {"shape": (c, size, k), "taken": taken, **times, "ratio": times["winograd"] / times["direct"],
            "rmse_direct": _rmse(direct.run(x, b), exact), "rmse_winograd": _rmse(wino.run(x, b), exact)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--all-sizes", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"# {cpu_name()}, {args.threads} thread(s), torch {torch.__version__}; medians of {args.reps} calls, us")
    print("| C in | size | C out | taken | eager | direct | Winograd | Winograd / direct | RMSE direct | RMSE Winograd |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in run(SHAPES, args.reps, args.all_sizes):
        c, size, k = r["shape"]
        print(f"| {c} | {size}x{size} | {k} | {'yes' if r['taken'] else 'no'} | {r['eager']:.0f} | {r['direct']:.0f} | "
              f"{r['winograd']:.0f} | {r['ratio']:.2f} | {r['rmse_direct']:.1e} | {r['rmse_winograd']:.1e} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
