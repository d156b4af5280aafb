// End-to-end test in a real VS Code (code-server + Chromium): install the packaged .vsix, open the
// examples folder, compile and profile examples/foo1.py from the palette with the real compiler and
// language server, and check the hover, the profile view and "Show Kernels for Function".
// Saves screenshots under docs/screenshots/. Run: npm run test:e2e --workspace vscode-extension
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { CodeServer, ensureCodeServer, EXTENSION_ID } from "./codeServer.mjs";
import { activeTabTitle, clickToken, hoverUntil, launchBrowser, openFile, runCommand, waitForWorkbench, webviewFrame } from "./workbench.mjs";

const EXTENSION_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const REPO = path.resolve(EXTENSION_DIR, "..");
const PYTHON = process.env.KERNEL_LENS_E2E_PYTHON ?? path.join(REPO, ".venv/bin/python");
const EXAMPLES = process.env.KERNEL_LENS_E2E_EXAMPLES ?? path.join(REPO, "examples");
const SCRIPT = "foo1.py";
const SCREENSHOTS = path.join(REPO, "docs/screenshots");
const VSIX = path.join(EXTENSION_DIR, "kernel-lens.vsix");
const JOB_TIMEOUT_MS = 5 * 60_000;

const state = {};

/** A copy of examples/ without earlier runs, so every kernel the test sees comes from this test's jobs. */
function freshWorkspace(root) {
  const workspace = path.join(root, "examples");
  fs.cpSync(EXAMPLES, workspace, { recursive: true, filter: (src) => !src.includes(`${path.sep}torch_compile_debug`) });
  return workspace;
}

/** Every kernel_map.json the compiler wrote into the workspace, parsed. */
function kernelMaps(workspace) {
  const debugRoot = path.join(workspace, "torch_compile_debug");
  if (!fs.existsSync(debugRoot)) {
    return [];
  }
  return fs
    .readdirSync(debugRoot, { recursive: true })
    .filter((file) => path.basename(file) === "kernel_map.json")
    .map((file) => JSON.parse(fs.readFileSync(path.join(debugRoot, file), "utf8")));
}

function compiledKernelNames(workspace) {
  return [...new Set(kernelMaps(workspace).flatMap((map) => map.kernels.map((k) => k.name)))];
}

/** The kernels (with their output_code.py line ranges) built from nodes whose source is in `fn`. */
function kernelsOfFunction(workspace, fn) {
  return kernelMaps(workspace).flatMap((map) => {
    const functionOf = new Map(map.nodes.map((node) => [node.name, node.source?.function]));
    return map.kernels.filter((k) => k.nodes.some((node) => functionOf.get(node) === fn));
  });
}

/** Waits for our job's closing notification and fails on a failure message. */
async function waitForJobMessage(page, success, failure) {
  const toasts = page.locator(".notifications-toasts .notification-list-item-message");
  const deadline = Date.now() + JOB_TIMEOUT_MS;
  while (Date.now() < deadline) {
    const texts = await toasts.allInnerTexts();
    const bad = texts.find((t) => t.includes("Kernel Lens") && failure.test(t));
    assert.equal(bad, undefined, `job failed: ${bad}`);
    if (texts.some((t) => success.test(t))) {
      return;
    }
    await page.waitForTimeout(1_000);
  }
  throw new Error(`no "${success}" notification within ${JOB_TIMEOUT_MS} ms`);
}

/** A notification saying the language server failed or crashed, if one is shown. */
async function serverFailure(page) {
  const texts = await page.locator(".notifications-toasts .notification-list-item-message").allInnerTexts();
  return texts.find((t) => /language server (failed|crashed|stopped)/.test(t));
}

async function screenshot(name) {
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  await state.page.screenshot({ path: path.join(SCREENSHOTS, name) });
}

/** The extension host's log of our output channel, for failure reports. */
function extensionLog() {
  const logs = [];
  const walk = (dir) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (/Kernel Lens|exthost\.log|remoteexthost\.log/.test(entry.name)) logs.push(`--- ${full}\n${fs.readFileSync(full, "utf8").slice(-4000)}`);
    }
  };
  try {
    walk(path.join(state.server.userDataDir, "logs"));
  } catch {
    // no logs yet
  }
  return logs.join("\n");
}

before(async () => {
  assert.ok(fs.existsSync(PYTHON), `no interpreter at ${PYTHON} (make the project's .venv first)`);
  assert.ok(fs.existsSync(path.join(EXAMPLES, SCRIPT)), `no ${SCRIPT} in ${EXAMPLES}`);
  assert.ok(fs.existsSync(VSIX), `no ${VSIX}: run npm run package first`);
  const home = ensureCodeServer(EXTENSION_DIR);
  state.root = fs.mkdtempSync(path.join(os.tmpdir(), "kernel-lens-e2e-"));
  state.workspace = freshWorkspace(state.root);
  state.server = new CodeServer({
    home,
    stateDir: path.join(state.root, "code-server"),
    settings: {
      "security.workspace.trust.enabled": false,
      "kernelLens.pythonPath": PYTHON,
      "workbench.startupEditor": "none",
      "workbench.tips.enabled": false,
      "workbench.welcomePage.walkthroughs.openOnInstall": false,
      "workbench.colorTheme": "Default Dark Modern",
      "telemetry.telemetryLevel": "off",
      "update.mode": "none",
      "extensions.autoCheckUpdates": false,
      "extensions.autoUpdate": false,
      "extensions.ignoreRecommendations": true,
      "chat.commandCenter.enabled": false,
      "editor.minimap.enabled": false,
      "editor.hover.delay": 300,
      "terminal.integrated.gpuAcceleration": "off",
    },
  });
  const installed = state.server.installExtension(VSIX);
  assert.ok(installed.includes(EXTENSION_ID), `vsix not installed; code-server lists ${JSON.stringify(installed)}`);
  await state.server.start();
  state.browser = await launchBrowser(path.join(state.root, "chromium"));
  state.page = state.browser.pages()[0] ?? (await state.browser.newPage());
  await state.page.goto(state.server.folderUrl(state.workspace));
  await waitForWorkbench(state.page);
  await openFile(state.page, SCRIPT, "def foo1");
});

after(async (context) => {
  if (state.page && process.exitCode) {
    await state.page.screenshot({ path: path.join(state.root, "failure.png") }).catch(() => undefined);
  }
  await state.browser?.close().catch(() => undefined);
  await state.server?.stop();
  if (state.root && !process.env.KERNEL_LENS_E2E_KEEP) {
    fs.rmSync(state.root, { recursive: true, force: true });
  }
});

test("Compile Current File runs the compiler in a task, and hovering the function shows its kernels", { timeout: 8 * 60_000 }, async (t) => {
  try {
    await clickToken(state.page, "def foo1", "foo1");
    await runCommand(state.page, "Kernel Lens: Compile Current File");
    await waitForJobMessage(state.page, /foo1\.py compiled/, /failed|rejected|exited with code/);
    const kernels = [...new Set(kernelsOfFunction(state.workspace, "foo1").map((k) => k.name))];
    assert.ok(kernels.length > 0, "the compile job wrote no kernel_map.json with kernels of foo1");
    const hover = await hoverUntil(state.page, "def foo1", "foo1", kernels, 180_000, () => serverFailure(state.page));
    t.diagnostic(`hover: ${hover.replace(/\s+/g, " ").slice(0, 200)}`);
    await screenshot("hover.png");
  } catch (error) {
    t.diagnostic(extensionLog());
    t.diagnostic(state.server.logTail());
    throw error;
  }
});

test("Profile Current File opens the profile view with one row per kernel", { timeout: 8 * 60_000 }, async (t) => {
  try {
    await clickToken(state.page, "def foo1", "foo1");
    await runCommand(state.page, "Kernel Lens: Profile Current File");
    await waitForJobMessage(state.page, /foo1\.py profiled/, /failed|rejected|exited with code/);
    const rows = webviewFrame(state.page).locator("tr.kernel-row");
    await rows.first().waitFor({ timeout: 60_000 });
    const names = await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-kernel")));
    const compiled = compiledKernelNames(state.workspace);
    t.diagnostic(`profile rows: ${names.join(", ")}`);
    assert.ok(names.length > 0);
    assert.ok(names.every((n) => compiled.includes(n)), `profile rows ${names} are not kernels the compiler wrote (${compiled})`);
    assert.ok((await webviewFrame(state.page).locator(".chart-row").count()) > 0, "no bar chart");
    await screenshot("profile.png");
  } catch (error) {
    t.diagnostic(extensionLog());
    throw error;
  }
});

test("Show Kernels for Function opens the generated kernel beside the source", { timeout: 3 * 60_000 }, async (t) => {
  try {
    await state.page.locator(".editor-group-container .tab", { hasText: SCRIPT }).first().click();
    await clickToken(state.page, "def foo1", "foo1");
    await runCommand(state.page, "Kernel Lens: Show Kernels for Function");
    // Several kernels: a quick pick asks which; one kernel opens at once.
    const ofFoo1 = kernelsOfFunction(state.workspace, "foo1");
    const names = [...new Set(ofFoo1.map((k) => k.name))];
    let chosen = names[0];
    if (names.length > 1) {
      const firstRow = state.page.locator(".quick-input-list .monaco-list-row").first();
      await firstRow.waitFor({ timeout: 15_000 });
      const label = await firstRow.innerText();
      chosen = names.find((n) => label.includes(n));
      await state.page.keyboard.press("Enter");
    }
    assert.ok(chosen, "could not tell which kernel was opened");
    await state.page.waitForFunction(
      () => document.querySelector(".editor-group-container.active .tab.active .label-name")?.textContent === "output_code.py",
      null,
      { timeout: 30_000 },
    );
    assert.equal(await activeTabTitle(state.page), "output_code.py");
    // The cursor must sit inside the chosen kernel's lines of output_code.py (kernel_map.json, 1-based).
    const status = await state.page.locator(".statusbar-item", { hasText: /Ln \d+, Col \d+/ }).first().innerText();
    const cursor = Number(/Ln (\d+)/.exec(status)[1]);
    const ranges = ofFoo1.filter((k) => k.name === chosen).map((k) => k.output_code_lines);
    t.diagnostic(`opened ${chosen} at line ${cursor}; kernel_map ranges ${JSON.stringify(ranges)}`);
    assert.ok(ranges.some(([start, end]) => start <= cursor && cursor <= end), `cursor line ${cursor} is outside ${chosen}`);
    await screenshot("kernel-beside-source.png");
  } catch (error) {
    t.diagnostic(extensionLog());
    throw error;
  }
});
