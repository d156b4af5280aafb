/** Quick-pick items of the graph-breaks picker: one per place and reason, with how many compiles, frames and
 * ranks hit it. Pure (no `vscode` import). */

import { GraphBreakSummary } from "../common/protocol";
import { plural } from "./compilePick";
import { locationLabel } from "./profileHtml";

export interface GraphBreakItem {
  label: string;
  description: string;
  detail: string;
  graphBreak: GraphBreakSummary;
}

/** Dynamo's reason, one line: recent torch writes the traced instruction first ("Encountered graph break when
 * attempting to trace CALL: …") and the break's kind last ("Failed to trace builtin operator"), older torch
 * only the kind. */
export function reasonLines(reason: string): { gist: string; context: string[] } {
  const lines = reason.split("\n").map((line) => line.trim()).filter((line) => line.length > 0);
  return { gist: lines.pop() ?? "graph break", context: lines };
}

export function graphBreakItem(b: GraphBreakSummary): GraphBreakItem {
  const { gist, context } = reasonLines(b.reason);
  const ranks = b.ranks.length === 0 ? [] : [`${b.ranks.length === 1 ? "rank" : "ranks"} ${b.ranks.join(",")}`];
  const functions = b.functions.length === 0 ? [] : [`in ${b.functions.join(", ")}`];
  return {
    label: `${gist} — ${locationLabel(b.uri, b.line)}`,
    description: [plural(b.frames, "frame"), plural(b.compiles, "compile"), ...ranks].join(" · "),
    detail: [...functions, ...context].join(" · "),
    graphBreak: b,
  };
}
