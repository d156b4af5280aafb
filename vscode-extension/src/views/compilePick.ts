/** Quick-pick items of the compiles picker: one per Dynamo compile, saying what triggered it, why it recompiled
 * and which of its guards a later call failed; and of its follow-up guards pick. Pure (no `vscode` import). */

import { CompileGuard, CompileSummary } from "../common/protocol";
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
  const why = c.recompile_reasons.length > 0 ? ` · recompiled: ${recompileWords(c)}` : "";
  const failed = (c.guard_list ?? []).filter((g) => g.failed_for.length > 0);
  const broke = failed.map((g) => ` · guard failed → recompiled as ${g.failed_for.join(", ")}: \`${shortGuard(g.code)}\``).join("");
  const settings = Object.entries(c.config ?? {}).map(([name, value]) => `${name} = ${JSON.stringify(value)}`);
  const config = settings.length > 0 ? ` · settings: ${settings.join(", ")}` : "";
  const origin = c.origin && c.origin !== "TORCH_TRACE" ? ` · ${c.origin}` : "";
  return {
    label: `[${c.compile_id}] ${c.function}`,
    description: `${figures.join(" · ")}${rank}${origin}`,
    detail: `${called}${wrapped}${why}${broke}${config}`,
    compile: c,
  };
}

/** A guard's code cut for one line of a picker: check_tensor's dispatch keys dropped, long code shortened. */
export function shortGuard(code: string, width = 80): string {
  const tensor = /^check_tensor\(([^,]+), Tensor, DispatchKeySet\([^)]*\), (.*)\)$/.exec(code);
  const short = tensor ? `check_tensor(${tensor[1]}, ${tensor[2]})` : code;
  return short.length > width ? `${short.slice(0, width - 1)}…` : short;
}

/** The recompile's reasons in words, each with the guard of the earlier compile it quotes where known. */
function recompileWords(c: CompileSummary): string {
  const causes = c.recompile_causes ?? [];
  if (causes.length === 0) {
    return c.recompile_reasons.join("; ");
  }
  return causes
    .map((r) => (r.guard ? `${r.words} (guard \`${shortGuard(r.guard)}\` of ${r.cache_entry ?? "an earlier compile"})` : r.words))
    .join("; ");
}

export interface GuardItem {
  label: string;
  description: string;
  detail: string;
  /** 0-based line of the compiled function's file to open, if the guard came from one. */
  line: number | null;
}

/** The follow-up pick of one compile's guards: first why it is a recompile (the earlier compile's guard that
 * failed), then its guards, the ones a later call failed first and marked, the rest in Dynamo's order. */
export function guardItems(c: CompileSummary): GuardItem[] {
  const causes = (c.recompile_causes ?? []).map((r) => ({
    label: `$(history) recompiled: ${r.words}`,
    description: r.guard ? `failed guard of ${r.cache_entry ?? "an earlier compile"}: ${shortGuard(r.guard, 120)}` : "",
    detail: "why Dynamo compiled this frame again",
    line: null,
  }));
  const guards = c.guard_list ?? [];
  const ordered = [...guards.filter((g) => g.failed_for.length > 0), ...guards.filter((g) => g.failed_for.length === 0)];
  return [...causes, ...ordered.map(guardItem)];
}

function guardItem(g: CompileGuard): GuardItem {
  const where = g.line === null ? "checked on every call (not from a line of yours)" : `from line ${g.line + 1}`;
  const failed = g.failed_for.length > 0;
  return {
    label: failed ? `$(error) ${g.kind}` : g.kind,
    description: shortGuard(g.code, 120),
    detail: failed ? `failed: a later call broke it and Dynamo recompiled as ${g.failed_for.join(", ")} · ${where}` : where,
    line: g.line,
  };
}
