/** How the pickers name an indexed run (`kernelLens.listRuns`'s RunSummary): its kind, its rank in a distributed
 * job ("rank 0 of 2"), its graphs and kernels; where the job's ranks compiled differently, how (no `vscode` here). */
import { RunSummary } from "./protocol";

/** "lens · rank 0 of 2 · 2 graph(s) · 11 kernel(s)" (no rank outside a distributed job). */
export function runDescription(run: RunSummary): string {
  return [run.kind, ...(run.rank_label ? [run.rank_label] : []), `${run.graphs} graph(s)`, `${run.kernels} kernel(s)`].join(" · ");
}

/** The run's time and folder, then "$(warning) ranks differ: …" where the job's other ranks compiled otherwise. */
export function runDetail(run: RunSummary): string {
  return `${run.time} · ${run.path}` + (run.diverges ? ` · $(warning) ranks differ: ${run.diverges}` : "");
}

/** A run as answers that name one put it: "run_… (rank 0 of 2)", the bare id outside a distributed job. */
export function runName(runId: string, rankLabel?: string): string {
  return rankLabel ? `${runId} (${rankLabel})` : runId;
}
