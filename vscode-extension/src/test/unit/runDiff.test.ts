/** Tests of the Compare Runs entries and side texts, on a `kernelLens.diffRuns` answer for examples/foo1.py
 * compiled with LENS_MAX_FUSION_SIZE=64 then 2 (trimmed: the `nodes` lists are left out). */
import assert from "node:assert/strict";
import { test } from "node:test";
import { RunDiff } from "../../common/protocol";
import { changedChoices, choiceLabel, sideText, sliceLines } from "../../views/runDiff";

const A = "file:///w/torch_compile_debug/run_a/lens/graph_1/output_code.py";
const B = "file:///w/torch_compile_debug/run_b/lens/graph_1/output_code.py";
const DIFF: RunDiff = {
  changed: true,
  a_run: "run_a",
  b_run: "run_b",
  summary: { graphs_matched: 2, kernels_same: 1, fused_differently: 2 },
  graphs: [
    {
      a: "graph_0",
      b: "graph_0",
      change: "changed",
      kernels: [
        { change: "same", a: ["cpp_fused_x_0"], b: ["cpp_fused_x_0"], code_diff: null, time_ms: null, a_locations: [], b_locations: [] },
        {
          change: "nodes_changed",
          a: ["cpp_fused_cat_maximum_neg_0"],
          b: ["cpp_fused_maximum_neg_0"],
          code_diff: null,
          time_ms: { a: 0.12, b: 0.15 },
          a_locations: [],
          b_locations: [],
        },
      ],
    },
    {
      a: "graph_1",
      b: "graph_1",
      change: "changed",
      kernels: [
        {
          change: "split",
          a: ["cpp_fused__softmax_mul_0"],
          b: ["cpp_fused__softmax_mul_0", "cpp_fused__softmax_mul_1"],
          code_diff: null,
          time_ms: null,
          a_locations: [{ name: "cpp_fused__softmax_mul_0", uri: A, start_line: 1, end_line: 3 }],
          b_locations: [
            { name: "cpp_fused__softmax_mul_1", uri: B, start_line: 4, end_line: 4 },
            { name: "cpp_fused__softmax_mul_0", uri: B, start_line: 0, end_line: 1 },
          ],
        },
      ],
    },
  ],
};

test("every kernel group but the same ones is offered, labelled change: A kernels → B kernels", () => {
  const choices = changedChoices(DIFF);
  assert.deepEqual(
    choices.map((c) => [c.label, c.description]),
    [
      ["nodes_changed: cpp_fused_cat_maximum_neg_0 → cpp_fused_maximum_neg_0", "graph_0 → graph_0 · 0.120 → 0.150 ms"],
      ["split: cpp_fused__softmax_mul_0 → cpp_fused__softmax_mul_0, cpp_fused__softmax_mul_1", "graph_1 → graph_1"],
    ],
  );
  assert.equal(choices[1].entry, DIFF.graphs[1].kernels[0]);
});

test("added and removed kernels name the empty side; a diff without changes offers nothing", () => {
  assert.equal(choiceLabel({ ...DIFF.graphs[0].kernels[1], change: "added", a: [] }), "added: (none) → cpp_fused_maximum_neg_0");
  assert.deepEqual(changedChoices({ ...DIFF, changed: false, graphs: [{ ...DIFF.graphs[0], kernels: [DIFF.graphs[0].kernels[0]] }] }), []);
});

test("each side is its kernels' line ranges (0-based, inclusive) in the entry's order", () => {
  const files = new Map([
    [A, "a0\na1\na2\na3\na4"],
    [B, "b0\r\nb1\r\nb2\r\nb3\r\nb4\r\n"],
  ]);
  const entry = DIFF.graphs[1].kernels[0];
  assert.equal(sideText(entry.a, entry.a_locations, files), "a1\na2\na3\n");
  assert.equal(sideText(entry.b, entry.b_locations, files), "b0\nb1\n\nb4\n");
  assert.equal(sliceLines("x\ny", { name: "k", uri: A, start_line: 1, end_line: 9 }), "y");
});

test("a side without kernels, or whose code is missing, says so instead of showing nothing", () => {
  assert.equal(sideText([], [], new Map()), "# (no kernel on this side)\n");
  const entry = DIFF.graphs[1].kernels[0];
  assert.equal(sideText(entry.a, entry.a_locations, new Map()), "# cpp_fused__softmax_mul_0: its code was not found in the index\n");
});
