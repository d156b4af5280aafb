/** Tests of reading `kernelLens.*` settings into initializationOptions. */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { initializationOptions, readSettings, resolvePath, SettingsSource, SEVERITY_DEFAULTS } from "../../common/settings";

function source(values: Record<string, unknown>): SettingsSource {
  return { get: <T>(key: string) => values[key] as T | undefined };
}

test("empty settings: debug roots default to every workspace folder, no interpreter", () => {
  const settings = readSettings(source({}), "/ws/a", ["/ws/a", "/ws/b"]);
  assert.deepEqual(settings, {
    pythonPath: "",
    debugRoots: ["/ws/a", "/ws/b"],
    traceDirs: [],
    profilerTraces: [],
    serverEnv: {},
    severities: { graphBreakSeverity: "warning", recompileSeverity: "information", compileFailureSeverity: "error", rankDivergenceSeverity: "warning" },
  });
});

test("relative and ${workspaceFolder} paths are anchored at the workspace folder", () => {
  const settings = readSettings(
    source({ debugRoots: ["runs", "${workspaceFolder}/more", "/abs/x"], traceDirs: ["./traces"], profilerTraces: ["prof", "/abs/t.pt.trace.json"], pythonPath: ".venv/bin/python" }),
    "/ws/a",
    ["/ws/a"],
  );
  assert.deepEqual(settings.debugRoots, ["/ws/a/runs", "/ws/a/more", "/abs/x"]);
  assert.deepEqual(settings.traceDirs, ["/ws/a/traces"]);
  assert.deepEqual(settings.profilerTraces, ["/ws/a/prof", "/abs/t.pt.trace.json"]);
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
  const settings = readSettings(source({ traceDirs: ["/t"], profilerTraces: ["/p.pt.trace.json"], serverEnv: { A: "1" }, pythonPath: "/p" }), "/ws", ["/ws"]);
  assert.deepEqual(initializationOptions(settings), { debugRoots: ["/ws"], traceDirs: ["/t"], profilerTraces: ["/p.pt.trace.json"], ...SEVERITY_DEFAULTS });
});

test("severity settings reach the server under its own keys; unknown values fall back to the server's default", () => {
  const settings = readSettings(
    source({ graphBreakSeverity: "error", recompileSeverity: "hint", compileFailureSeverity: "fatal", rankDivergenceSeverity: 2 }),
    "/ws",
    ["/ws"],
  );
  const options = initializationOptions(settings);
  assert.equal(options.graphBreakSeverity, "error");
  assert.equal(options.recompileSeverity, "hint");
  assert.equal(options.compileFailureSeverity, "error");
  assert.equal(options.rankDivergenceSeverity, "warning");
});

test("every severity setting is contributed in package.json with the server's values and default", () => {
  const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, "../../../package.json"), "utf8"));
  const properties = manifest.contributes.configuration.properties;
  for (const [key, fallback] of Object.entries(SEVERITY_DEFAULTS)) {
    assert.deepEqual(properties[`kernelLens.${key}`]?.enum, ["error", "warning", "information", "hint"], key);
    assert.equal(properties[`kernelLens.${key}`].default, fallback, key);
  }
});
