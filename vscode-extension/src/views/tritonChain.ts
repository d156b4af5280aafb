/** The compiled chain of a Triton kernel in the kernel view (issue 47): which stages a `kernelLens.tritonChain`
 * answer offers, which one opens first, the labels linking a stage line and its Triton line, and the cost of the
 * kernel and of the user line a Triton line came from. Pure (no `vscode` import) so unit tests read it directly. */

import { CommandError, LineCosts, RunProfile } from "../common/protocol";
import { TritonChain, TritonChainResult, TritonChainStart, TritonKernelsAtResult, TritonLaunch } from "../common/protocolGpu";
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

/** A config's time in µs below 0.01 ms (small kernels' configs differ in the second digit of µs). */
function configTime(ms: number): string {
  return ms < 0.01 ? `${(ms * 1000).toFixed(2)} µs` : `${formatMs(ms)} ms`;
}

/** Block sizes read elsewhere than the autotuning records say where from. */
const NOT_TUNED = ["kernel source", "launch grid", "only config"];
const COORDESC = "coordinate descent";

/** The label on the kernel's `@triton_heuristics` line: its launched config and how it was chosen,
 *  `⚙ R0_BLOCK=64 (kernel source) · XBLOCK=8 · num_warps=2 · num_stages=1 · fastest of 3 configs tried (3.62 µs; next 4.10 µs)`. */
export function launchLabel(launch: TritonLaunch): string {
  const settings = launch.settings.map((s) => `${s.name}=${s.value}` + (NOT_TUNED.includes(s.origin) ? ` (${s.origin})` : ""));
  const chosen = launch.tried.find((t) => t.chosen);
  const searched = launch.tried.filter((t) => t.search === COORDESC);
  const next = (chosen?.search === COORDESC ? searched : launch.tried).find((t) => !t.chosen);
  const times = chosen ? ` (${configTime(chosen.ms)}${next ? `; next ${configTime(next.ms)}` : ""})` : "";
  const how = chosen?.search === COORDESC
    ? `kept by coordinate descent of ${searched.length} configs${times}` + (launch.tried.length > searched.length
      ? ` after ${launch.tried.length - searched.length} autotuned` : "")
    : chosen ? `fastest of ${launch.tried.length} configs tried${times}`
    : launch.tried.length > 0 ? `${launch.tried.length} configs tried` : `one config (${launch.chosen_by})`;
  return `⚙ ${[...settings, how].join(" · ")}`;
}

/** The hover of that line: every config autotuning tried, fastest first, the chosen one marked. */
export function launchHover(launch: TritonLaunch): string {
  if (launch.tried.length === 0) {
    return `Launched config (${launch.chosen_by}): ${launch.settings.map((s) => `${s.name}=${s.value} from ${s.origin}`).join(", ")}`;
  }
  const rows = launch.tried.map((t) => `| \`${t.config}\` | ${t.search} | ${configTime(t.ms)} | ${t.registers ?? "?"} | ${t.spills ?? "?"} | ${t.chosen ? "**chosen**" : ""} |`);
  return [`Autotuning (cache entry chosen by ${launch.chosen_by})`, "", "| config | search | time | registers | spills | |",
    "|---|---|---|---|---|---|", ...rows].join("\n");
}
