/** Tests of the compiles picker's items. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { CompileSummary } from "../../common/protocol";
import { compileItem } from "../../views/compilePick";

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
