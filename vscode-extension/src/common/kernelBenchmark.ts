/** The palette's "Benchmark Triton Kernel": what it asks the server's `kernelLens.benchmarkKernel` (the cursor's
 * line of a Triton kernel in an output_code.py) and how the answer reads to a user — the kernel's standalone
 * module as compiled and as max-autotune compiles it, side by side. Pure (no `vscode` import). */

import { JobOutcome } from "./jobs";
import { BenchmarkKernelResult, BenchmarkVariant } from "./protocolGpu";

const LABELS: Record<string, string> = {
  default: "as compiled", max_autotune: "max-autotune", env_max_autotune: "MAX_AUTOTUNE=1 only",
};

/** `max-autotune 0.005 ms · 789.59 GB/s (6 configs)`, or why the variant has no time. */
export function variantText(variant: BenchmarkVariant): string {
  const label = LABELS[variant.variant] ?? variant.variant;
  if (variant.ms === null || variant.gb_per_s === null) {
    return `${label}: failed (${variant.error ?? "no timing"})`;
  }
  const tried = variant.configs_tried ? ` (${variant.configs_tried} configs)` : "";
  return `${label} ${variant.ms.toFixed(3)} ms · ${variant.gb_per_s.toFixed(2)} GB/s${tried}`;
}

/** Timed here: the variants side by side (info); refused or no GPU: the server's words, which carry what was
 * recorded earlier (warning); no answer: error. */
export function benchmarkOutcome(result: BenchmarkKernelResult | null | undefined): JobOutcome {
  if (result === undefined || result === null) {
    return { level: "error", text: "Kernel Lens: the language server did not answer (is it running?).", succeeded: false };
  }
  if (result.error !== undefined) {
    return { level: "warning", text: `Kernel Lens: ${result.error}`, succeeded: false };
  }
  const variants = (result.variants ?? []).map(variantText).join(" | ");
  const device = result.device ? ` on ${result.device}` : "";
  return { level: "info", text: `Kernel Lens: \`${result.kernel ?? "?"}\`${device}: ${variants}`, succeeded: true };
}
