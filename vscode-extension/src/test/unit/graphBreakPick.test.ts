/** Tests of the graph-breaks picker's items. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { GraphBreakSummary } from "../../common/protocol";
import { graphBreakItem, reasonLines } from "../../views/graphBreakPick";

const PRINT_BREAK: GraphBreakSummary = {
  reason: "Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):\n\nFailed to trace builtin operator",
  uri: "file:///w/my%20prog.py",
  line: 8,
  compiles: 6,
  frames: 3,
  ranks: [],
  functions: ["both", "scale"],
};

test("a break says its kind, place, frames and compiles; the detail its functions and the traced instruction", () => {
  const item = graphBreakItem(PRINT_BREAK);
  assert.equal(item.label, "Failed to trace builtin operator — my prog.py:9");
  assert.equal(item.description, "3 frames · 6 compiles");
  assert.equal(item.detail, "in both, scale · Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):");
  assert.equal(item.graphBreak, PRINT_BREAK);
});

test("one frame, one compile, the ranks that hit it; an old torch's one-line reason", () => {
  const item = graphBreakItem({ ...PRINT_BREAK, reason: "Data-dependent branching", compiles: 1, frames: 1, ranks: [0, 1], functions: [] });
  assert.equal(item.label, "Data-dependent branching — my prog.py:9");
  assert.equal(item.description, "1 frame · 1 compile · ranks 0,1");
  assert.equal(item.detail, "");
  assert.equal(graphBreakItem({ ...PRINT_BREAK, ranks: [3] }).description, "3 frames · 6 compiles · rank 3");
});

test("a reason without text still names the break", () => {
  assert.deepEqual(reasonLines(" \n"), { gist: "graph break", context: [] });
});
