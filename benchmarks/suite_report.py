"""benchmarks/suite_bench.py's markdown table: per model the medians of each backend, lens against the mode's baseline
and eager, accuracy, compile times (first call, and the graph compiler's own share), where lens's and the baseline's
time goes, and the share of nodes lens generated code for; then geomeans per suite over the accurate models."""
from __future__ import annotations

import math

from suite_modes import Mode

_NAMES = {"eager": "eager", "inductor": "Inductor", "inductor_freezing": "Ind.+fr.", "lens": "lens"}


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def _split(split: dict[str, float] | None) -> str:
    """Shares of the profiled step (its absolute ms are wall time under the profiler, inflated by a loaded machine and
    the profiler's own cost per op; the medians are the timing)."""
    total = sum(split.values()) if split else 0.0
    if not total:
        return "-"
    return " / ".join(f"{split[k] / total:.0%}" for k in ("gemm_conv", "other_aten", "generated"))


def _pair(d: dict[str, float], a: str, b: str) -> str:
    return f"{d[a]:.1f} / {d[b]:.1f}" if a in d and b in d else "-"


def table(results: list, mode: Mode) -> str:
    """The mode's table (results: suite_bench.ModelResult). Ratios are of medians taken interleaved in one process."""
    base = _NAMES.get(mode.baseline, mode.baseline)
    backends = [b for b in mode.backends if any(b in r.median_ms for r in results)] or list(mode.backends)
    lines = ["| suite | model | " + " | ".join(f"{_NAMES.get(b, b)} ms" for b in backends) +
             f" | lens / {base} | lens / eager | accurate | first call lens / {base} s | graph compiler lens / {base}"
             f" s (ratio) | lens GEMM+conv / other ATen / rest | {base} GEMM+conv / other ATen / rest | "
             "lens native | status |",
             "|---" * (len(backends) + 11) + "|"]
    ratios: dict[str, list[float]] = {}
    compile_ratios: list[float] = []
    for r in results:
        m, c = r.median_ms, r.backend_compile_s
        ratio = m["lens"] / m[mode.baseline] if "lens" in m and mode.baseline in m else None
        vs_eager = m["lens"] / m["eager"] if "lens" in m and "eager" in m else None
        if ratio is not None and r.accurate.get("lens"):
            ratios.setdefault(r.suite, []).append(ratio)
        c_ratio = c["lens"] / c[mode.baseline] if c.get("lens") and c.get(mode.baseline) else None
        if c_ratio is not None:
            compile_ratios.append(c_ratio)
        share = r.lens_native_share
        lines.append("| " + " | ".join([
            r.suite, r.name, *(f"{m[b]:.2f}" if b in m else "-" for b in backends),
            f"{ratio:.2f}" if ratio else "-", f"{vs_eager:.2f}" if vs_eager else "-",
            {True: "yes", False: "NO"}.get(r.accurate.get("lens"), "-"),
            _pair(r.first_call_s, "lens", mode.baseline),
            _pair(c, "lens", mode.baseline) + (f" ({c_ratio:.2f})" if c_ratio else ""),
            _split(r.split_ms.get("lens")), _split(r.split_ms.get(mode.baseline)),
            f"{share:.0%}" if share is not None else "-",
            r.status + (f" ({r.lens_eager_graphs} graphs eager)" if r.lens_eager_graphs else "")]) + " |")
    for suite, values in ratios.items():
        lines.append(f"\ngeomean lens / {base} ({mode.name}), {suite}: {geomean(values):.2f} over {len(values)} models")
    if compile_ratios:
        lines.append(f"\ngeomean graph compiler lens / {base}: {geomean(compile_ratios):.2f} over "
                     f"{len(compile_ratios)} models")
    return "\n".join(lines)
