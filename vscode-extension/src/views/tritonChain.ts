/** The compiled chain of a Triton kernel in the kernel view (issue 47): which stages a `kernelLens.tritonChain`
 * answer offers, which one opens first, the labels linking a stage line and its Triton line, and the cost of the
 * kernel and of the user line a Triton line came from. Pure (no `vscode` import) so unit tests read it directly. */

import { CommandError, LineCosts, RunProfile, TritonChain, TritonChainResult, TritonChainStart, TritonKernelsAtResult } from "../common/protocol";
import { formatMs } from "./profileHtml";

/** Triton's stages in compile order, as the server names them, and as the view shows them. */
export const STAGES = ["ttir", "ttgir", "llir", "ptx", "sass"] as const;
export const STAGE_TITLES: Record<string, string> = { ttir: "TTIR", ttgir: "TTGIR", llir: "LLIR", ptx: "PTX", sass: "SASS" };
/** The stage the kernel view opens first: PTX keeps inlined code's call sites, so most of its lines link. */
export const FIRST_STAGES = ["ptx", "sass", "llir", "ttgir", "ttir"];

export function isChain(answer: TritonChainResult | null | undefined): answer is TritonChain {
  return !!answer && !("error" in answer) && typeof (answer as TritonChain).kernel === "string";
}

export function chainError(answer: TritonChainResult | null | undefined): string | undefined {
  return answer && "error" in answer ? (answer as CommandError).error : undefined;
}

/** The stages the kernel's kept cache entry has, in compile order. */
export function stagesOf(chain: TritonChain): string[] {
  return STAGES.filter((stage) => chain.stages[stage]?.uri);
}

export function firstStage(chain: TritonChain): string | undefined {
  const present = stagesOf(chain);
  return FIRST_STAGES.find((stage) => present.includes(stage));
}

function basename(uri: string): string {
  return decodeURIComponent(uri.slice(uri.lastIndexOf("/") + 1));
}

/** The user line's cost in this kernel (the kernel's time shared among the lines it computes). */
export function lineCostMs(costs: LineCosts | undefined, chain: TritonChain): number | undefined {
  if (!costs || !chain.source || costs.uri !== chain.source.uri) {
    return undefined;
  }
  const line = costs.lines.find((entry) => entry.line === chain.source?.line);
  const kernel = line?.kernels.find((k) => k.name === chain.kernel && k.graph_id === chain.graph_id);
  return kernel?.ms ?? undefined;
}

/** The kernel's time per call of its graph and its share, from the run's profile. */
export function kernelCost(profile: RunProfile | null | undefined, chain: TritonChain): { ms: number; percent: number } | undefined {
  const graph = profile?.graphs.find((g) => g.graph_id === chain.graph_id);
  const kernel = graph?.kernels.find((k) => k.name === chain.kernel);
  return kernel ? { ms: kernel.total_ms, percent: kernel.percent } : undefined;
}

/** `prog.py:31 · 0.002 ms`: where the Triton line came from and what that line costs in this kernel. */
function sourcePart(chain: TritonChain, costMs: number | undefined): string {
  if (!chain.source) {
    return "";
  }
  const where = `${basename(chain.source.uri)}:${chain.source.line + 1}${chain.precision === "line" ? "" : " (kernel)"}`;
  return ` · ${where}` + (costMs === undefined ? "" : ` · ${formatMs(costMs)} ms`);
}

/** The label on the Triton line when the cursor is on a stage line: `◀ PTX:120 · prog.py:31 · 0.002 ms`. */
export function tritonLineLabel(chain: TritonChain, stageLine: number, costMs: number | undefined): string {
  return `◀ ${STAGE_TITLES[chain.stage] ?? chain.stage}:${stageLine + 1}${sourcePart(chain, costMs)}`;
}

/** The label on a stage's first linked line when the cursor is on a Triton line: `◀ output_code.py:45 · ...`. */
export function stageLineLabel(chain: TritonChain, costMs: number | undefined): string {
  return `◀ ${basename(chain.triton.uri)}:${chain.triton.line + 1}${sourcePart(chain, costMs)}`;
}

/** The label on the kernel's `def` line: its time per graph call and share, and the stage shown. */
export function kernelLabel(cost: { ms: number; percent: number } | undefined, stage: string): string {
  const time = cost ? `${formatMs(cost.ms)} ms · ${cost.percent.toFixed(1)}% of the graph call · ` : "";
  return `⏱ ${time}${STAGE_TITLES[stage] ?? stage} beside`;
}

/** The places a line leads to (`kernelLens.tritonKernelsAt`), or why there are none. */
export function chainStarts(answer: TritonKernelsAtResult | null | undefined): TritonChainStart[] | string {
  if (!answer) {
    return "no answer from the language server";
  }
  return "error" in answer ? (answer as CommandError).error : answer.kernels;
}

/** A kernel the user picks among those computing a line: its name, graph and time per graph call. */
export function startItem(start: TritonChainStart): { label: string; description: string } {
  const time = start.ms === null ? "not profiled" : `${formatMs(start.ms)} ms`;
  return { label: start.kernel, description: `${start.graph_id} · ${time}` };
}
