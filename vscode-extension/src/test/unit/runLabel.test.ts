/** Tests of the run pickers' words on the `kernelLens.listRuns` answer for tests/fixtures/lens_ddp (a 2-rank gloo
 * DDP job, rank 1 recompiled) and for a run outside a distributed job. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { RunSummary } from "../../common/protocol";
import { runDescription, runDetail, runName } from "../../common/runLabel";

const RANK1: RunSummary = {
  id: "run_2026_02_01_10_00_00_000000-pid_302",
  path: "/w/torch_compile_debug/run_2026_02_01_10_00_00_000000-pid_302",
  kind: "lens",
  time: "2026-02-01T10:00:00",
  graphs: 4,
  kernels: 22,
  selected: false,
  rank: 1,
  world_size: 2,
  rank_label: "rank 1 of 2",
  diverges: "rank 0 of 2: 2 graphs, rank 1 of 2: 4",
};

test("a rank's run is named by its rank, and its detail says how the ranks differ", () => {
  assert.equal(runDescription(RANK1), "lens · rank 1 of 2 · 4 graph(s) · 22 kernel(s)");
  assert.equal(runDetail(RANK1),
    "2026-02-01T10:00:00 · /w/torch_compile_debug/run_2026_02_01_10_00_00_000000-pid_302 · $(warning) ranks differ: rank 0 of 2: 2 graphs, rank 1 of 2: 4");
});

test("ranks that agree, and runs outside a job, say nothing more", () => {
  const agreeing = { ...RANK1, diverges: undefined };
  assert.equal(runDetail(agreeing), "2026-02-01T10:00:00 · /w/torch_compile_debug/run_2026_02_01_10_00_00_000000-pid_302");
  const single: RunSummary = { id: "run_a", path: "/w/run_a", kind: "inductor", time: "t", graphs: 1, kernels: 3, selected: true };
  assert.equal(runDescription(single), "inductor · 1 graph(s) · 3 kernel(s)");
  assert.equal(runDetail(single), "t · /w/run_a");
});

test("answers that name a run (kernels at a line, a profile) add its rank", () => {
  assert.equal(runName("run_a", "rank 0 of 2"), "run_a (rank 0 of 2)");
  assert.equal(runName("run_a", undefined), "run_a");
});
