/** Tests of reading `kernelLens.*` settings into initializationOptions. */
import assert from "node:assert/strict";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { initializationOptions, readSettings, resolvePath, SettingsSource } from "../../common/settings";

function source(values: Record<string, unknown>): SettingsSource {
  return { get: <T>(key: string) => values[key] as T | undefined };
}

test("empty settings: debug roots default to every workspace folder, no interpreter", () => {
  const settings = readSettings(source({}), "/ws/a", ["/ws/a", "/ws/b"]);
  assert.deepEqual(settings, { pythonPath: "", debugRoots: ["/ws/a", "/ws/b"], traceDirs: [], serverEnv: {} });
});

test("relative and ${workspaceFolder} paths are anchored at the workspace folder", () => {
  const settings = readSettings(
    source({ debugRoots: ["runs", "${workspaceFolder}/more", "/abs/x"], traceDirs: ["./traces"], pythonPath: ".venv/bin/python" }),
    "/ws/a",
    ["/ws/a"],
  );
  assert.deepEqual(settings.debugRoots, ["/ws/a/runs", "/ws/a/more", "/abs/x"]);
  assert.deepEqual(settings.traceDirs, ["/ws/a/traces"]);
  assert.equal(settings.pythonPath, "/ws/a/.venv/bin/python");
});

test("a bare interpreter name stays a name looked up on PATH", () => {
  assert.equal(readSettings(source({ pythonPath: " python3.11 " }), "/ws", ["/ws"]).pythonPath, "python3.11");
});

test("~ and ${env:NAME} expand", () => {
  process.env.KERNEL_LENS_TEST_DIR = "/from/env";
  assert.equal(resolvePath("~/x", "/ws"), path.join(os.homedir(), "x"));
  assert.equal(resolvePath("${env:KERNEL_LENS_TEST_DIR}/y", "/ws"), "/from/env/y");
});

test("values of the wrong type are dropped instead of reaching the server", () => {
  const settings = readSettings(source({ debugRoots: ["ok", 3, null, ""], traceDirs: "notalist", serverEnv: { A: "1", B: 2 } }), "/ws", ["/ws"]);
  assert.deepEqual(settings.debugRoots, ["/ws/ok"]);
  assert.deepEqual(settings.traceDirs, []);
  assert.deepEqual(settings.serverEnv, { A: "1" });
});

test("initializationOptions carry exactly the server's contract keys", () => {
  const settings = readSettings(source({ traceDirs: ["/t"], serverEnv: { A: "1" }, pythonPath: "/p" }), "/ws", ["/ws"]);
  assert.deepEqual(initializationOptions(settings), { debugRoots: ["/ws"], traceDirs: ["/t"] });
});
