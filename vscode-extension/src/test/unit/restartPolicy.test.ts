/** Tests of the crash budget and of debounced restarts. */
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { test } from "node:test";
import { CrashBudget, Debouncer } from "../../common/restartPolicy";

test("crashes restart until the budget is spent within the window", () => {
  let now = 0;
  const budget = new CrashBudget(2, 1000, () => now);
  assert.deepEqual(budget.recordCrash(), { restart: true, count: 1 });
  now = 10;
  assert.deepEqual(budget.recordCrash(), { restart: true, count: 2 });
  now = 20;
  assert.deepEqual(budget.recordCrash(), { restart: false, count: 3 });
});

test("crashes older than the window are forgotten, and reset forgets all", () => {
  let now = 0;
  const budget = new CrashBudget(1, 1000, () => now);
  budget.recordCrash();
  now = 1500;
  assert.deepEqual(budget.recordCrash(), { restart: true, count: 1 });
  budget.reset();
  assert.deepEqual(budget.recordCrash(), { restart: true, count: 1 });
});

test("several schedules in a burst run the action once", async () => {
  let runs = 0;
  const debouncer = new Debouncer(20, () => runs++);
  debouncer.schedule();
  debouncer.schedule();
  debouncer.schedule();
  assert.equal(debouncer.pending, true);
  await sleep(80);
  assert.equal(runs, 1);
  assert.equal(debouncer.pending, false);
});

test("a cancelled schedule never runs", async () => {
  let runs = 0;
  const debouncer = new Debouncer(10, () => runs++);
  debouncer.schedule();
  debouncer.cancel();
  await sleep(40);
  assert.equal(runs, 0);
});
