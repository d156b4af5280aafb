/** Tests of the kernel view's bands: lookups both ways, colour groups, labels. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { LinkedLines } from "../../common/protocol";
import { BAND_COLOURS, lineLabel, LinkIndex } from "../../views/linkedBands";

const LINKED: LinkedLines = {
  run_id: "run_1",
  graph_id: "graph_0",
  source_uri: "file:///w/foo1.py",
  generated_uri: "file:///w/torch_compile_debug/run_1/lens/graph_0/output_code.py",
  links: [
    { source_line: 4, generated_lines: [30, 31], band: 0 },
    { source_line: 5, generated_lines: [32, 40], band: 1 },
    { source_line: 9, generated_lines: [40], band: 6 },
  ],
  prelude: { start: 0, end: 25 },
  graphs: [],
};

test("a source line finds its generated lines and a generated line every source line it computes", () => {
  const index = new LinkIndex(LINKED);
  assert.deepEqual(index.targets("source", 4), { band: 0, lines: [30, 31] });
  assert.deepEqual(index.targets("generated", 40), { band: 1, lines: [5, 9] });
  assert.equal(index.targets("source", 7), undefined);
  assert.equal(index.targets("generated", 2), undefined);
});

test("bands cycle through the palette on both sides", () => {
  const index = new LinkIndex(LINKED);
  const source = index.linesByColour("source");
  assert.equal(source.length, BAND_COLOURS.length);
  assert.deepEqual(source[0], [4, 9]); // band 6 wraps to colour 0
  assert.deepEqual(index.linesByColour("generated")[1], [32, 40]);
});

test("labels name the file and the 1-based line", () => {
  assert.equal(lineLabel(LINKED.source_uri, 4), "foo1.py:5");
  assert.equal(lineLabel("file:///w/my%20file.py", 0), "my file.py:1");
});
