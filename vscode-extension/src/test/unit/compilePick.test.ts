/** Tests of the compiles picker's items. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { CompileSummary } from "../../common/protocol";
import { compileItem, guardItems, shortGuard } from "../../views/compilePick";

const RECOMPILE: CompileSummary = {
  function: "branchy",
  compile_id: "0/1",
  rank: null,
  uri: "file:///w/prog.py",
  def_line: 4,
  call_site: { uri: "file:///w/prog.py", line: 27 },
  ops: 2,
  guards: 9,
  compile_time_s: 0.123,
  status: "compiled",
  graph_breaks: 1,
  recompile_reasons: ["`a`'s dimension 0 changed: compiled for 10, called with 12"],
  guard_list: [],
  recompile_causes: [],
};

test("a compile says its id, frame, figures, call site and why it recompiled", () => {
  const item = compileItem(RECOMPILE);
  assert.equal(item.label, "[0/1] branchy");
  assert.equal(item.description, "compiled · 2 ops · 9 guards · 1 graph break · 0.12 s");
  assert.equal(item.detail, "called from prog.py:28 · recompiled: `a`'s dimension 0 changed: compiled for 10, called with 12");
});

test("a failed compile on a rank without a known call site", () => {
  const item = compileItem({ ...RECOMPILE, compile_id: "1/0", rank: 3, call_site: null, ops: null, guards: null, compile_time_s: null, status: "failed", graph_breaks: 0, recompile_reasons: [] });
  assert.equal(item.description, "failed · rank 3");
  assert.equal(item.detail, "call site unknown");
});

test("where torch.compile wrapped the function and the settings in force; one of our graphs says its run", () => {
  const item = compileItem({
    ...RECOMPILE, compile_id: "graph_0", call_site: null, recompile_reasons: [], graph_breaks: 0,
    origin: "debug directory, run r1", config: { "compiler.config.max_fusion_size": 2 },
    compile_call: { uri: "file:///w/prog.py", line: 20 },
  });
  assert.equal(item.description, "compiled · 2 ops · 9 guards · 0.12 s · debug directory, run r1");
  assert.equal(item.detail, "call site unknown · torch.compile at prog.py:21 · settings: compiler.config.max_fusion_size = 2");
});

// The guards of breaks_recompile_failure.py's first compile of branchy, as the server answers them (shortened list)
const A_GUARD = "check_tensor(L['a'], Tensor, DispatchKeySet(CPU, BackendSelect, ADInplaceOrView, AutogradCPU), torch.float32, device=None, requires_grad=False, size=[10], stride=[1])";
const FIRST: CompileSummary = {
  ...RECOMPILE,
  compile_id: "0/0",
  recompile_reasons: [],
  guard_list: [
    { kind: "GLOBAL_STATE", code: "___check_global_state() against {}", line: null, failed_for: [] },
    { kind: "EQUALS_MATCH", code: "L['n'] == 2", line: 5, failed_for: [] },
    { kind: "TENSOR_MATCH", code: A_GUARD, line: 5, failed_for: ["0/1"] },
  ],
};
const SHORT_A = "check_tensor(L['a'], torch.float32, device=None, requires_grad=False, size=[10], stride=[1])";

test("a guard reads without check_tensor's dispatch keys, cut to the width", () => {
  assert.equal(shortGuard(A_GUARD, 200), SHORT_A);
  assert.equal(shortGuard(A_GUARD, 20), "check_tensor(L['a']…");
  assert.equal(shortGuard("L['n'] == 2"), "L['n'] == 2");
});

test("the compile whose guard a later call failed says which guard and the recompile it caused", () => {
  const item = compileItem(FIRST);
  assert.equal(item.description, "compiled · 2 ops · 9 guards · 1 graph break · 0.12 s");  // figures unchanged
  assert.equal(item.detail, `called from prog.py:28 · guard failed → recompiled as 0/1: \`${shortGuard(A_GUARD)}\``);
});

test("a recompile quotes the failed guard of the compile before it beside the reason in words", () => {
  const words = "`a`'s dimension 0 changed: compiled for 10, called with 12";
  const item = compileItem({ ...RECOMPILE, recompile_causes: [{ cache_entry: "0/0", words, guard: A_GUARD }] });
  assert.equal(item.detail, `called from prog.py:28 · recompiled: ${words} (guard \`${shortGuard(A_GUARD)}\` of 0/0)`);
  const unknown = compileItem({ ...RECOMPILE, recompile_causes: [{ cache_entry: "0/0", words, guard: null }] });
  assert.equal(unknown.detail, `called from prog.py:28 · recompiled: ${words}`);
});

test("the guards pick lists the failed guard first, marked, then the rest in Dynamo's order", () => {
  const items = guardItems(FIRST);
  assert.deepEqual(items.map((i) => i.label), ["$(error) TENSOR_MATCH", "GLOBAL_STATE", "EQUALS_MATCH"]);
  assert.deepEqual(items[0], {
    label: "$(error) TENSOR_MATCH",
    description: SHORT_A,
    detail: "failed: a later call broke it and Dynamo recompiled as 0/1 · from line 6",
    line: 5,
  });
  assert.equal(items[1].detail, "checked on every call (not from a line of yours)");
  assert.equal(items[1].line, null);
  assert.equal(items[2].detail, "from line 6");
});

test("a recompile's guards pick starts with why it recompiled and the guard that failed", () => {
  const words = "`a`'s dimension 0 changed: compiled for 10, called with 12";
  const items = guardItems({ ...RECOMPILE, recompile_causes: [{ cache_entry: "0/0", words, guard: A_GUARD }],
    guard_list: [{ kind: "TENSOR_MATCH", code: "check_tensor(L['a'], Tensor, DispatchKeySet(CPU), torch.float32, size=[None], stride=[1])", line: 5, failed_for: [] }] });
  assert.deepEqual(items[0], { label: `$(history) recompiled: ${words}`, description: `failed guard of 0/0: ${SHORT_A}`,
    detail: "why Dynamo compiled this frame again", line: null });
  assert.equal(items[1].label, "TENSOR_MATCH");
  assert.equal(items.length, 2);
});
