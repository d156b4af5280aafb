/** Tests of the server lifecycle: nothing starts in an untrusted workspace, whatever asks for a start. */
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { test } from "node:test";
import { ServerLifecycle } from "../../common/serverLifecycle";

const DEBOUNCE_MS = 20;

/** A lifecycle over a recorder of what it did; `trusted` can be flipped as VS Code's trust grant would. */
function recorded(trusted: boolean) {
  const state = { trusted, events: [] as string[] };
  const lifecycle = new ServerLifecycle(
    {
      isTrusted: () => state.trusted,
      launch: async () => void state.events.push("launch"),
      shutdown: async () => void state.events.push("shutdown"),
      refused: () => void state.events.push("refused"),
    },
    DEBOUNCE_MS,
  );
  return { state, lifecycle };
}

test("in an untrusted workspace no start, restart or debounced restart launches the server", async () => {
  const { state, lifecycle } = recorded(false);
  await lifecycle.start();
  await lifecycle.restart(); // the Restart Server command
  lifecycle.scheduleRestart(); // a setting, the folders or the interpreter changed
  lifecycle.scheduleRestart();
  await sleep(DEBOUNCE_MS * 5);
  await lifecycle.settled();
  assert.deepEqual(state.events, ["refused", "shutdown", "refused", "shutdown", "refused"]);

  state.trusted = true; // the user granted trust: the next start runs
  await lifecycle.start();
  assert.equal(state.events.at(-1), "launch");
  assert.equal(state.events.filter((e) => e === "launch").length, 1);
});

test("in a trusted workspace a restart stops then launches, and a burst of changes restarts once", async () => {
  const { state, lifecycle } = recorded(true);
  await lifecycle.start();
  await lifecycle.restart();
  assert.deepEqual(state.events, ["launch", "shutdown", "launch"]);
  state.events.length = 0;
  lifecycle.scheduleRestart();
  lifecycle.scheduleRestart();
  lifecycle.scheduleRestart();
  await sleep(DEBOUNCE_MS * 5);
  await lifecycle.settled();
  assert.deepEqual(state.events, ["shutdown", "launch"]);
});

test("transitions run one at a time in the order asked, even when one fails", async () => {
  const events: string[] = [];
  let release: () => void = () => undefined;
  const lifecycle = new ServerLifecycle(
    {
      isTrusted: () => true,
      launch: () => new Promise<void>((resolve) => (release = () => (events.push("launched"), resolve()))),
      shutdown: async () => {
        events.push("shutdown");
        throw new Error("already gone");
      },
      refused: () => undefined,
    },
    DEBOUNCE_MS,
  );
  const started = lifecycle.start();
  const stopped = lifecycle.stop().catch(() => events.push("stop failed"));
  await sleep(DEBOUNCE_MS);
  assert.deepEqual(events, []); // the stop waits for the launch
  release();
  await started;
  await stopped;
  assert.deepEqual(events, ["launched", "shutdown", "stop failed"]);
});
