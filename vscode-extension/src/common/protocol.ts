/** Types of the results the language server's executeCommand handlers return (0-based lines, file URIs).
 * Generated from lsp_server/protocol.py by `python -m lsp_server.protocol_ts --write`: edit that file. */

export type RunKind = "lens" | "inductor";

export type KernelKind = "pointwise" | "reduction" | "persistent_reduction" | "extern" | "unknown" | string;

export type JobKind = "compile" | "profile" | "check-accuracy";

export interface RunSummary {
  id: string;
  path: string;
  kind: RunKind;
  time: string;
  graphs: number;
  kernels: number;
  selected: boolean;
  /** Its rank in a distributed job (lens/run.json); absent outside one. */
  rank?: number;
  world_size?: number;
  /** "rank 0 of 2": how the editor names the run's rank. */
  rank_label?: string;
  /** How the job's other ranks' runs differ from this one ("rank 1 of 2: 4 graphs, rank 0 of 2: 2"); absent where the ranks agree. */
  diverges?: string;
}

/** `kernelLens.selectRun` ({run_id} or a run id; null: the newest run answers again). */
export interface SelectRunResult {
  selected: string | null;
  error?: string;
}

export interface KernelLocation {
  name: string;
  kind: KernelKind;
  graph_id: string;
  run_id: string;
  uri: string;
  start_line: number;
  end_line: number;
  line: number;
  time_ms: number | null;
  /** The run's rank in a distributed job ("rank 0 of 2"); absent outside one. */
  rank_label?: string;
}

export interface SourceLocation {
  uri: string;
  line: number;
}

export interface ProfiledKernel {
  name: string;
  kind: KernelKind;
  calls: number;
  total_ms: number;
  percent: number;
  uri: string;
  line: number;
  source: SourceLocation | null;
}

export interface KindShare {
  kind: KernelKind;
  total_ms: number;
  percent: number;
}

export interface GraphProfile {
  graph_id: string;
  eager_ms: number | null;
  compiled_ms: number | null;
  speedup: number | null;
  /** Percent of the wall time the device was busy running kernels (real Inductor `-p` profiles), else null. */
  busy_percent?: number | null;
  /** One iteration under the profiler: kernel times and shares are of this (compiled_ms runs without it). */
  profiled_ms?: number | null;
  device?: "cuda" | "cpu" | string;
  categories: KindShare[];
  kernels: ProfiledKernel[];
}

export interface RunProfile {
  run_id: string;
  /** The run's rank in a distributed job ("rank 0 of 2"); absent outside one. */
  rank_label?: string;
  graphs: GraphProfile[];
  /** The run's source lines, costliest first (share of one profiled iteration). */
  lines?: CostlyLine[];
}

/** A source line and what it costs: each kernel's time split evenly over the source lines it computes. */
export interface CostlyLine {
  uri: string;
  file: string;
  line: number;
  code: string;
  percent: number;
  ms: number | null;
  kernels: string[];
}

/** One source line (0-based) and the generated lines (0-based) it became; lines of one band share a colour. */
export interface LineLink {
  source_line: number;
  generated_lines: number[];
  band: number;
}

/** Lines of a file, 0-based and inclusive. */
export interface LineRange {
  start: number;
  end: number;
}

export interface GraphLink {
  graph_id: string;
  uri: string;
}

/** `kernelLens.linkedLines` ({uri, graph_id?}): a user file linked with one graph's output_code.py. */
export interface LinkedLines {
  run_id: string;
  graph_id: string;
  source_uri: string;
  generated_uri: string;
  links: LineLink[];
  /** The C++ prelude before the first kernel (0-based, inclusive), folded by the kernel view. */
  prelude: LineRange | null;
  graphs: GraphLink[];
}

export interface LineCostKernel {
  name: string;
  graph_id: string;
  lines_sharing: number;
  percent: number | null;
  ms: number | null;
}

export interface LineCost {
  line: number;
  percent: number | null;
  ms: number | null;
  kernels: LineCostKernel[];
}

/** `kernelLens.lineCosts` ({uri}): each source line's share and ms per iteration, costliest first. */
export interface LineCosts {
  run_id: string;
  uri: string;
  lines: LineCost[];
  measures: string;
}

export interface ReindexResult {
  runs: number;
}

export interface JobResult {
  exit_code: number;
  output_tail: string;
}

/** Where one kernel of a diffed run is: its lines (0-based, inclusive) in that run's output_code.py. */
export interface KernelSpan {
  name: string;
  uri: string;
  start_line: number;
  end_line: number;
}

export type KernelChange = "same" | "code_changed" | "split" | "merged" | "regrouped" | "nodes_changed" | "added" | "removed";

export interface TimePair {
  a: number | null;
  b: number | null;
}

/** A user source line as the debug directory writes it (1-based). */
export interface SourceRef {
  file: string;
  line: number;
  function: string;
  code: string;
}

/** An FX node only one run has. */
export interface DiffNode {
  name: string;
  target: string;
  source: SourceRef | null;
}

/** A node of a kernel group: its FX name in each run (null where absent) and which kernel holds it. */
export interface KernelDiffNode {
  target: string;
  source: SourceRef | null;
  a: string | null;
  b: string | null;
  a_kernel: string | null;
  b_kernel: string | null;
}

/** One group of kernels sharing FX nodes across the two runs (`kernel-lens diff --json`). */
export interface KernelDiffEntry {
  change: KernelChange | string;
  a: string[];
  b: string[];
  /** Always sent; optional here, where the extension does not read it. */
  nodes?: KernelDiffNode[];
  code_diff: string | null;
  time_ms: TimePair | null;
  a_locations: KernelSpan[];
  b_locations: KernelSpan[];
}

export interface OutputsComparison {
  status: "same" | "changed" | "inputs_differ" | "not_saved" | "not_compared" | string;
  max_abs_error: number | null;
  max_rel_error: number | null;
}

export interface GraphDiff {
  a: string | null;
  b: string | null;
  /** Always sent; optional here, where the extension does not read it. */
  a_dir?: string | null;
  b_dir?: string | null;
  change: "same" | "changed" | "added" | "removed" | string;
  nodes_added?: DiffNode[];
  nodes_removed?: DiffNode[];
  kernels: KernelDiffEntry[];
  time_ms?: TimePair | null;
  outputs?: OutputsComparison;
}

/** `kernelLens.diffRuns` ({a, b} run ids): the diff, or `{error}`. */
export interface RunDiff {
  /** Always sent; optional here, where the extension does not read it. */
  version?: number;
  /** The runs' folders. */
  a?: string;
  b?: string;
  changed: boolean;
  a_run: string;
  b_run: string;
  summary: Record<string, number>;
  graphs: GraphDiff[];
}

export interface CommandError {
  error: string;
}

export type RunDiffResult = RunDiff | CommandError;

/** One guard Dynamo installed for a compile (the trace's `dynamo_cpp_guards_str`), as Dynamo wrote it. */
export interface CompileGuard {
  /** `TENSOR_MATCH`, `EQUALS_MATCH`, `LAMBDA_GUARD`... */
  kind: string;
  code: string;
  /** The compiled function's file's line the guard came from; null for those every compile has. */
  line: number | null;
  /** The later compiles whose recompile reason quotes this guard: it failed. */
  failed_for: string[];
}

/** Why a compile is a recompile: the earlier compile whose guard failed, in words, and that guard. */
export interface RecompileCause {
  cache_entry: string | null;
  words: string;
  /** The failed guard's code; null where the trace does not show it. */
  guard: string | null;
}

/** One Dynamo compile (`kernelLens.listCompiles` ({uri?})): what triggered it and why it recompiled. */
export interface CompileSummary {
  function: string;
  compile_id: string;
  rank: number | null;
  uri: string;
  def_line: number;
  call_site: SourceLocation | null;
  ops: number | null;
  guards: number | null;
  compile_time_s: number | null;
  status: "compiled" | "failed" | "no graph" | "ran eagerly" | "compiled, differs from eager";
  graph_breaks: number;
  recompile_reasons: string[];
  /** The guards themselves, in Dynamo's order (empty: not in a trace). */
  guard_list: CompileGuard[];
  recompile_causes: RecompileCause[];
  /** `TORCH_TRACE`, or the debug-directory run the graph came from. */
  origin?: string;
  /** The settings not at their default, by full name. */
  config?: Record<string, unknown>;
  /** The `torch.compile` that wrapped the function. */
  compile_call?: SourceLocation | null;
}

/** One graph break of the structured traces, once per place and reason. */
export interface GraphBreakSummary {
  reason: string;
  uri: string;
  line: number;
  compiles: number;
  frames: number;
  ranks: number[];
  functions: string[];
}

/** `kernelLens.listGraphBreaks` ({uri?}): most compiles first. */
export interface GraphBreaks {
  graph_breaks: GraphBreakSummary[];
}
