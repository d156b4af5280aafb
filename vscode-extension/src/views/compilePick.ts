/** Quick-pick items of the compiles picker: one per Dynamo compile, saying what triggered it and why it
 * recompiled. Pure (no `vscode` import). */

import { CompileSummary } from "../common/protocol";
import { locationLabel } from "./profileHtml";

export interface CompileItem {
  label: string;
  description: string;
  detail: string;
  compile: CompileSummary;
}

export function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}

export function compileItem(c: CompileSummary): CompileItem {
  const rank = c.rank === null ? "" : ` · rank ${c.rank}`;
  const figures = [
    c.status,
    c.ops === null ? null : plural(c.ops, "op"),
    c.guards === null ? null : plural(c.guards, "guard"),
    c.graph_breaks ? plural(c.graph_breaks, "graph break") : null,
    c.compile_time_s === null ? null : `${c.compile_time_s.toFixed(2)} s`,
  ].filter((part): part is string => part !== null);
  const called = c.call_site ? `called from ${locationLabel(c.call_site.uri, c.call_site.line)}` : "call site unknown";
  const wrapped = c.compile_call ? ` · torch.compile at ${locationLabel(c.compile_call.uri, c.compile_call.line)}` : "";
  const why = c.recompile_reasons.length > 0 ? ` · recompiled: ${c.recompile_reasons.join("; ")}` : "";
  const settings = Object.entries(c.config ?? {}).map(([name, value]) => `${name} = ${JSON.stringify(value)}`);
  const config = settings.length > 0 ? ` · settings: ${settings.join(", ")}` : "";
  const origin = c.origin && c.origin !== "TORCH_TRACE" ? ` · ${c.origin}` : "";
  return {
    label: `[${c.compile_id}] ${c.function}`,
    description: `${figures.join(" · ")}${rank}${origin}`,
    detail: `${called}${wrapped}${why}${config}`,
    compile: c,
  };
}
