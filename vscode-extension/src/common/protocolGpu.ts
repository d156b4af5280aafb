/** Types of the results the language server's executeCommand handlers return (0-based lines, file URIs), GPU runs.
 * Generated from lsp_server/protocol_gpu.py by `python -m lsp_server.protocol_ts --write`: edit that file. */

import type { SourceLocation, CommandError } from "./protocol";

export interface StageLinks {
  uri: string;
  lines: number[];
}

export interface TritonLine {
  uri: string;
  line: number;
  kernel_file_line: number;
  text: string;
}

export interface LaunchSetting {
  name: string;
  value: string;
  /** .best_config | autotune log | only config | kernel source | launch grid | cache entry */
  origin: string;
}

export interface TriedConfig {
  config: string;
  ms: number;
  registers: number | null;
  spills: number | null;
  chosen: boolean;
  /** autotune (the configs Inductor generated) | coordinate descent (its neighbours, after) */
  search: string;
}

/** The launched config of a Triton kernel and the configs autotuning tried (fastest first). */
export interface TritonLaunch {
  settings: LaunchSetting[];
  /** which cache entry launched: only entry | .best_config | coordinate descent | logged best config | profiled launch | unknown */
  chosen_by: string;
  tried: TriedConfig[];
}

/** `kernelLens.tritonChain` ({uri, line}): a Triton kernel's line in any stage (ttir ttgir llir ptx sass) or in output_code.py, its Triton line, FX nodes and user line, and every stage's lines from that Triton line. */
export interface TritonChain {
  kernel: string;
  graph_id: string;
  run_id: string;
  entry: string;
  stage: string;
  line: number;
  launch: TritonLaunch;
  triton: TritonLine;
  nodes: string[];
  /** line: the Triton line's own FX nodes; kernel: the index maps the line to no node, the kernel's nodes (and their first user line) stand in */
  precision: string;
  source: SourceLocation | null;
  stages: Record<string, StageLinks>;
}

export type TritonChainResult = TritonChain | CommandError;

/** A Triton kernel's chain opens on `line` of its graph's output_code.py (`uri`). */
export interface TritonChainStart {
  kernel: string;
  graph_id: string;
  run_id: string;
  uri: string;
  line: number;
  ms: number | null;
}

/** `kernelLens.tritonKernelsAt` ({uri, line}): the Triton kernels with a kept cache entry that a user's line (those computing it, most costly first), a kernel's own file or output_code.py line leads to. */
export interface TritonKernelsAt {
  kernels: TritonChainStart[];
}

export type TritonKernelsAtResult = TritonKernelsAt | CommandError;

/** One timed run of a kernel's standalone module: `default` (as compiled) or `max_autotune` (as `mode="max-autotune"` compiles it, run with TORCHINDUCTOR_MAX_AUTOTUNE=1). */
export interface BenchmarkVariant {
  variant: string;
  ms: number | null;
  gb: number | null;
  gb_per_s: number | null;
  configs_tried: number | null;
  best_config: string | null;
  error: string | null;
}

/** `kernelLens.benchmarkKernel` ({uri, line, maxAutotune?}): the kernel's standalone module timed on this machine's GPU, as compiled (`ms`, `gb_per_s`) and, unless maxAutotune is false, as max-autotune compiles it (`variants`, side by side); without a GPU, `error` says so and the figures are those recorded beside output_code.py (the `-k` line; `variants` from kernel_benchmarks.json). */
export interface BenchmarkKernelResult {
  error?: string;
  kernel?: string;
  ms?: number;
  gb?: number;
  gb_per_s?: number;
  registers?: number | null;
  spills?: number | null;
  shared?: number | null;
  recorded?: boolean;
  device?: string | null;
  variants?: BenchmarkVariant[];
}
