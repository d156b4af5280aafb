/** Tests of interpreter choice and of the server's and jobs' command lines. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { chooseInterpreter, describeInterpreter, jobCommandLine, serverCommandLine } from "../../common/interpreter";

test("our setting wins over the Python extension", () => {
  assert.deepEqual(chooseInterpreter("/venv/bin/python", "/conda/bin/python"), { command: "/venv/bin/python", source: "setting" });
});

test("the Python extension's environment is used when the setting is empty", () => {
  assert.deepEqual(chooseInterpreter("", "/conda/bin/python"), { command: "/conda/bin/python", source: "python-extension" });
  assert.deepEqual(chooseInterpreter("   ", "/conda/bin/python"), { command: "/conda/bin/python", source: "python-extension" });
});

test("python3 when neither is there", () => {
  const interpreter = chooseInterpreter(undefined, undefined);
  assert.deepEqual(interpreter, { command: "python3", source: "default" });
  assert.match(describeInterpreter(interpreter), /^python3 \(default/);
});

test("the server is `python -m lsp_server`", () => {
  assert.deepEqual(serverCommandLine({ command: "/v/bin/python", source: "setting" }), { command: "/v/bin/python", args: ["-m", "lsp_server"] });
});

test("a job runs `python -m compiler KIND FILE` from the script's folder", () => {
  assert.deepEqual(jobCommandLine({ command: "py", source: "default" }, "check-accuracy", "/w/examples/foo1.py"), {
    command: "py",
    args: ["-m", "compiler", "check-accuracy", "/w/examples/foo1.py"],
    cwd: "/w/examples",
  });
});
