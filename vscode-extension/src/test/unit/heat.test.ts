/** Tests of the cost gutter's levels, marks and hover text. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { LineCosts } from "../../common/protocol";
import { HEAT_COLOURS, heatLevel, heatMarkUri, heatMessage, linesByHeat } from "../../views/heat";

const COSTS: LineCosts = {
  run_id: "run_1",
  uri: "file:///w/foo1.py",
  measures: "",
  lines: [
    { line: 4, percent: 60, ms: 0.6, kernels: [{ name: "k0", graph_id: "graph_0", lines_sharing: 1, percent: 60, ms: 0.6 }] },
    { line: 5, percent: 10, ms: 0.004, kernels: [{ name: "k1", graph_id: "graph_0", lines_sharing: 3, percent: 10, ms: 0.004 }] },
    { line: 6, percent: null, ms: null, kernels: [] },
  ],
};

test("the costliest line is the hottest level, a small share a cool one, none no mark", () => {
  assert.equal(heatLevel(60, 60), HEAT_COLOURS.length - 1);
  assert.equal(heatLevel(10, 60), 0);
  assert.equal(heatLevel(0, 60), 0);
  const levels = linesByHeat(COSTS);
  assert.deepEqual(levels[HEAT_COLOURS.length - 1], [4]);
  assert.deepEqual(levels[0], [5]);
  assert.ok(!levels.flat().includes(6));
});

test("the mark is an SVG bar of the level's colour; the hover says how the time was split", () => {
  const svg = Buffer.from(heatMarkUri("#d64541").split(",")[1], "base64").toString();
  assert.match(svg, /<rect [^>]*fill="#d64541"/);
  assert.equal(heatMessage(COSTS.lines[1]), "Kernel Lens: 10.0% of the profiled iteration · 4.00 µs per iteration — `k1` 10.0% (its time split over 3 lines)");
});
