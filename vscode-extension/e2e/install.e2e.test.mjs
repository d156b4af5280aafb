// End-to-end test of the one-step install: kernelLens.pythonPath names a fresh interpreter that has torch but not
// kernel-lens; the extension starts no server and offers to install the wheel the .vsix carries, saying which
// Python and torch it found; after "Install" the server runs from that interpreter, and a compile job and the
// hover work through what pip installed.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { descendantProcesses, EditorSession, PYTHON, until } from "./session.mjs";
import { clickToken, hoverUntil } from "./workbench.mjs";

let session;
let root;
let fresh;

/** A virtual environment without pip, setuptools or kernel-lens of its own, seeing the project's other packages
 * (torch, pygls, ...) through links: what a user's torch environment looks like to the extension. */
function freshInterpreter(dir) {
  execFileSync("python3", ["-m", "venv", "--without-pip", path.join(dir, "venv")]);
  const python = path.join(dir, "venv/bin/python");
  const sitePackages = (p) => JSON.parse(execFileSync(p, ["-c", "import json, site; print(json.dumps(site.getsitepackages()))"]).toString())[0];
  const projectSite = sitePackages(PYTHON);
  const shared = path.join(dir, "project-packages");
  fs.mkdirSync(shared);
  for (const name of fs.readdirSync(projectSite).filter((entry) => !/kernel_lens/i.test(entry))) {
    fs.symlinkSync(path.join(projectSite, name), path.join(shared, name));
  }
  fs.writeFileSync(path.join(sitePackages(python), "project_packages.pth"), `${shared}\n`);
  return python;
}

function hasKernelLens(python) {
  const found = execFileSync(python, ["-c", "import importlib.util; print(importlib.util.find_spec('lsp_server') is not None)"], { cwd: root });
  return found.toString().trim() === "True";
}

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "kernel-lens-e2e-install-"));
  fresh = freshInterpreter(root);
  assert.equal(hasKernelLens(fresh), false);
  session = await EditorSession.open({ trusted: true, settings: { "kernelLens.pythonPath": fresh } });
});

after(async () => {
  await session?.close();
  if (root && !process.env.KERNEL_LENS_E2E_KEEP) fs.rmSync(root, { recursive: true, force: true });
});

test("an interpreter without kernel-lens gets an install offer, and after Install the server runs from it", { timeout: 8 * 60_000 }, (t) =>
  session.reporting(t, async () => {
    const torch = execFileSync(fresh, ["-c", "import importlib.metadata as m; print(m.version('torch'))"]).toString().trim();
    const offer = session.page.locator(".notifications-toasts .notification-list-item", { hasText: "kernel-lens is not installed in" }).first();
    await offer.waitFor({ timeout: 120_000 });
    const words = await offer.innerText();
    assert.ok(words.includes(fresh) && words.includes(`It has torch ${torch}.`) && words.includes("Install kernel-lens 0.1.0 there"), words);
    // asked, not done: nothing installed and no server until the user answers
    assert.equal(hasKernelLens(fresh), false);
    assert.deepEqual(session.languageServerPids(), []);

    await offer.getByRole("button", { name: "Install", exact: true }).click();
    await session.waitForToast(/installed kernel-lens 0\.1\.0 into/, 5 * 60_000);
    assert.equal(hasKernelLens(fresh), true);
    const servers = await until(() => {
      const found = descendantProcesses(session.server.child.pid).filter((p) => /-m lsp_server\b/.test(p.line));
      return found.length > 0 && found;
    }, 60_000, () => "no language server started after the install");
    assert.ok(servers.every((p) => p.line.startsWith(`${fresh} -m lsp_server`)), JSON.stringify(servers));

    // the compiler and the server that pip installed, at work: a compile job, then the hover
    await session.compileFile("foo1.py", "def foo1", "foo1");
    const kernels = session.compiledKernelNames();
    assert.ok(kernels.length > 0);
    await clickToken(session.page, "def foo1", "foo1");
    const hover = await hoverUntil(session.page, "def foo1", "foo1", kernels, 120_000);
    t.diagnostic(`hover: ${hover.replace(/\s+/g, " ").slice(0, 160)}`);
  }),
);
