/** Tests of the one-step install: the offer's decisions and words, and, for real, the probe in the project's
 * interpreter and in a fresh one without kernel-lens, and pip installing the wheel the .vsix carries into it. */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { bundledWheel, decideInstall, installOutcome, parseProbe, pipInstallLine, Probe, PROBE } from "../../common/install";
import { Interpreter } from "../../common/interpreter";

const REPO = path.resolve(__dirname, "../../../..");
const VENV_PYTHON = path.join(REPO, ".venv/bin/python");
const interpreter: Interpreter = { command: "/envs/a/bin/python", source: "setting" };
const wheel = "/ext/wheels/kernel_lens-0.1.0-py3-none-any.whl";
const missing: Probe = { python: "3.11.2", executable: "/envs/a/bin/python", kernelLens: null, torch: "2.13.0+cpu", server: false };

test("an interpreter that has the server starts it, whatever the wheel", () => {
  assert.deepEqual(decideInstall({ ...missing, server: true, kernelLens: "0.1.0" }, interpreter, wheel), { kind: "ready" });
  assert.deepEqual(decideInstall({ ...missing, server: true }, interpreter, undefined), { kind: "ready" }); // a checkout
});

test("without it, the offer names the interpreter, the torch it found, and the bundled version", () => {
  const decision = decideInstall(missing, interpreter, wheel);
  assert.equal(decision.kind, "offer");
  assert.equal(decision.kind === "offer" && decision.wheel, wheel);
  assert.match(decision.kind === "offer" ? decision.message : "", /not installed in \/envs\/a\/bin\/python \(Python 3\.11\.2\)\. It has torch 2\.13\.0\+cpu\. Install kernel-lens 0\.1\.0 there/);
  const noTorch = decideInstall({ ...missing, torch: null }, interpreter, wheel);
  assert.match(noTorch.kind === "offer" ? noTorch.message : "", /It has no torch: pip will download torch as well/);
});

test("without a bundled wheel nothing is offered, only said", () => {
  const decision = decideInstall(missing, interpreter, undefined);
  assert.equal(decision.kind, "cannot");
  assert.match(decision.kind === "cannot" ? decision.message : "", /pip install kernel-lens.*kernelLens\.pythonPath/);
});

test("the bundled wheel is the highest kernel_lens version; other files are not wheels of ours", () => {
  assert.equal(bundledWheel(["/w/kernel_lens-0.9.0-py3-none-any.whl", "/w/kernel_lens-0.10.0-py3-none-any.whl", "/w/x.txt"]),
    "/w/kernel_lens-0.10.0-py3-none-any.whl");
  assert.equal(bundledWheel(["/w/torch-2.13.0-cp311-cp311-linux_x86_64.whl", "/w/kernel_lens.tar.gz"]), undefined);
});

test("pip runs as the interpreter's own module; its outcome is said with pip's last lines", () => {
  assert.deepEqual(pipInstallLine(interpreter, wheel), { command: "/envs/a/bin/python", args: ["-m", "pip", "install", "--disable-pip-version-check", wheel] });
  assert.deepEqual(installOutcome(0, "Successfully installed kernel-lens-0.1.0", { ...missing, server: true, kernelLens: "0.1.0" }),
    { ok: true, message: "Kernel Lens: installed kernel-lens 0.1.0 into /envs/a/bin/python; starting the server." });
  const failed = installOutcome(1, "Collecting torch\nERROR: No matching distribution found for torch>=2.5\n", undefined);
  assert.equal(failed.ok, false);
  assert.match(failed.message, /pip exited with code 1\): Collecting torch ERROR: No matching distribution found for torch>=2\.5$/);
  assert.equal(parseProbe("Traceback (most recent call last):\n"), undefined);
  assert.equal(parseProbe('{"python": 3}'), undefined);
});

/** A fresh virtual environment that sees the project's packages (torch, pygls...) but not kernel-lens: a path
 * entry of links to the project venv's site-packages, less kernel-lens's own (its editable install). */
function freshInterpreter(root: string): string {
  // without its own pip and setuptools: those of the project (torch needs a newer setuptools than a bare venv has)
  execFileSync("python3", ["-m", "venv", "--without-pip", path.join(root, "venv")]);
  const python = path.join(root, "venv/bin/python");
  const sitePackages = (p: string) => JSON.parse(execFileSync(p, ["-c", "import json, site; print(json.dumps(site.getsitepackages()))"]).toString())[0];
  const projectSite = sitePackages(VENV_PYTHON);
  const shared = path.join(root, "project-packages");
  fs.mkdirSync(shared);
  for (const name of fs.readdirSync(projectSite).filter((entry) => !/kernel_lens/i.test(entry))) {
    fs.symlinkSync(path.join(projectSite, name), path.join(shared, name));
  }
  fs.writeFileSync(path.join(sitePackages(python), "project_packages.pth"), `${shared}\n`);
  return python;
}

function probe(python: string, cwd: string): Probe | undefined {
  return parseProbe(execFileSync(python, ["-c", PROBE], { cwd }).toString());
}

test("for real: the probe, and pip installing the bundled wheel into an interpreter without kernel-lens", { skip: !fs.existsSync(VENV_PYTHON) && "no project .venv", timeout: 300_000 }, () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "kernel-lens-install-"));
  try {
    const project = probe(VENV_PYTHON, root);
    assert.equal(project?.server, true);
    assert.equal(project?.kernelLens, "0.1.0");

    const python = freshInterpreter(root);
    const before = probe(python, root);
    assert.ok(before, "the fresh interpreter did not answer the probe");
    assert.deepEqual([before.server, before.kernelLens, before.torch], [false, null, project?.torch]);

    const built = execFileSync("node", [path.join(REPO, "vscode-extension/scripts/build-wheel.mjs"), path.join(root, "wheels")]).toString().trim();
    const found = bundledWheel(fs.readdirSync(path.join(root, "wheels")).map((name) => path.join(root, "wheels", name)));
    assert.equal(found, built);
    const decision = decideInstall(before, { command: python, source: "setting" }, found);
    assert.equal(decision.kind, "offer");
    const line = pipInstallLine({ command: python, source: "setting" }, found!);
    // the project's packages are installed where pip looks: nothing is downloaded
    execFileSync(line.command, [...line.args, "--no-index"], { cwd: root, stdio: "ignore" });

    const after = probe(python, root);
    assert.deepEqual([after?.server, after?.kernelLens], [true, "0.1.0"]);
    assert.equal(installOutcome(0, "", after).ok, true);
    // the server, the backend's entry point and the CLI came with it
    const help = execFileSync(path.join(root, "venv/bin/kernel-lens"), ["--help"], { cwd: root }).toString();
    assert.match(help, /profile-view/);
    const backend = execFileSync(python, ["-c", "from importlib.metadata import entry_points; print([e.value for e in entry_points(group='torch_dynamo_backends') if e.name == 'lens'])"], { cwd: root }).toString();
    assert.match(backend, /compiler\.backend:lens_backend/);
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});
