/** Turns a `kernelLens.diffRuns` answer into the entries the user picks from and the text of each side's
 * kernels (their line ranges cut out of output_code.py). Pure (no `vscode` import) so tests use real diffs. */

import { GraphDiff, KernelDiffEntry, KernelSpan, RunDiff } from "../common/protocol";

/** One changed kernel group, ready for a quick pick. */
export interface DiffChoice {
  /** "split: cpp_fused_add_mul_0 → cpp_fused_add_0, cpp_fused_add_mul_1" */
  label: string;
  /** "graph_0 → graph_0 · 0.120 → 0.150 ms" */
  description: string;
  graph: GraphDiff;
  entry: KernelDiffEntry;
}

const NONE = "(none)";

function names(kernels: string[]): string {
  return kernels.length > 0 ? kernels.join(", ") : NONE;
}

function timeText(time: KernelDiffEntry["time_ms"]): string {
  const ms = (value: number | null) => (typeof value === "number" && Number.isFinite(value) ? value.toFixed(3) : "–");
  return time ? ` · ${ms(time.a)} → ${ms(time.b)} ms` : "";
}

export function choiceLabel(entry: KernelDiffEntry): string {
  return `${entry.change}: ${names(entry.a)} → ${names(entry.b)}`;
}

/** Every kernel group that is not `same`, in the diff's order. */
export function changedChoices(diff: RunDiff): DiffChoice[] {
  return diff.graphs.flatMap((graph) =>
    graph.kernels
      .filter((entry) => entry.change !== "same")
      .map((entry) => ({
        label: choiceLabel(entry),
        description: `${graph.a ?? NONE} → ${graph.b ?? NONE}${timeText(entry.time_ms)}`,
        graph,
        entry,
      })),
  );
}

/** Lines `span.start_line..span.end_line` (0-based, inclusive) of `text`. */
export function sliceLines(text: string, span: KernelSpan): string {
  const lines = text.split(/\r?\n/);
  return lines.slice(Math.max(0, span.start_line), Math.max(0, span.end_line + 1)).join("\n");
}

/**
 * One side of the diff: each named kernel's code, in the entry's order, separated by a blank line.
 * @param files the text of each output_code.py the spans point into, by URI
 */
export function sideText(kernelNames: string[], spans: KernelSpan[], files: ReadonlyMap<string, string>): string {
  if (kernelNames.length === 0) {
    return "# (no kernel on this side)\n";
  }
  const parts = kernelNames.map((name) => {
    const span = spans.find((s) => s.name === name);
    const text = span ? files.get(span.uri) : undefined;
    return span && text !== undefined ? sliceLines(text, span) : `# ${name}: its code was not found in the index`;
  });
  return `${parts.join("\n\n")}\n`;
}
