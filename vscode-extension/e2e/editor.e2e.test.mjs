// End-to-end test in a real VS Code (code-server + Chromium): install the packaged .vsix, open the
// examples folder, compile and profile foo1.py from the palette with the real compiler and language
// server, and check the hover, the profile view and "Show Kernels for Function".
// Saves screenshots under docs/screenshots/. Run: npm run test:e2e --workspace vscode-extension
import assert from "node:assert/strict";
import fs from "node:fs";
import { after, before, test } from "node:test";
import path from "node:path";
import { EditorSession, SCRIPT } from "./session.mjs";
import {
  activeTabTitle, clickToken, clickUntilActiveTab, hoverUntil, openFile, runCommand, settledCursorLine, waitForActiveTab, webviewFrame,
} from "./workbench.mjs";

const JOB_TIMEOUT_MS = 5 * 60_000;
let session;

/** Waits for our job's closing notification; fails at once on a failure message. */
async function waitForJobMessage(page, success) {
  const toasts = page.locator(".notifications-toasts .notification-list-item-message");
  const deadline = Date.now() + JOB_TIMEOUT_MS;
  while (Date.now() < deadline) {
    const texts = await toasts.allInnerTexts();
    const bad = texts.find((t) => t.includes("Kernel Lens") && /failed|rejected|exited with code|cancelled/.test(t));
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
  return texts.find((t) => /language server (failed to start|crashed)/.test(t));
}

/** Runs `body`; on failure adds the logs to the test's output. */
async function reporting(t, body) {
  try {
    await body();
  } catch (error) {
    t.diagnostic(session?.failureReport() ?? "no session");
    const shot = await session?.failureScreenshot(t.name);
    t.diagnostic(`screenshot of the failure: ${shot}`);
    throw error;
  }
}

before(async () => {
  session = await EditorSession.open({ trusted: true });
});

after(async () => {
  await session?.close();
});

test("Compile Current File runs the compiler in a task, and hovering the function shows its kernels", { timeout: 8 * 60_000 }, (t) =>
  reporting(t, async () => {
    await clickToken(session.page, "def foo1", "foo1");
    await runCommand(session.page, "Kernel Lens: Compile Current File");
    await waitForJobMessage(session.page, /foo1\.py compiled/);
    const kernels = [...new Set(session.kernelsOfFunction("foo1").map((k) => k.name))];
    assert.ok(kernels.length > 0, "the compile job wrote no kernel_map.json with kernels of foo1");
    const hover = await hoverUntil(session.page, "def foo1", "foo1", kernels, 180_000, () => serverFailure(session.page));
    t.diagnostic(`hover: ${hover.replace(/\s+/g, " ").slice(0, 200)}`);
    // The hover came from our server, started by the extension host of this code-server.
    assert.equal(session.languageServerPids().length, 1, "expected exactly one language server");
    await session.screenshot("hover.png");
  }),
);

test("Profile Current File opens the profile view with one row per kernel", { timeout: 8 * 60_000 }, (t) =>
  reporting(t, async () => {
    await clickToken(session.page, "def foo1", "foo1");
    await runCommand(session.page, "Kernel Lens: Profile Current File");
    await waitForJobMessage(session.page, /foo1\.py profiled/);
    const rows = webviewFrame(session.page).locator("tr.kernel-row");
    await rows.first().waitFor({ timeout: 60_000 });
    const names = await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-kernel")));
    const compiled = session.compiledKernelNames();
    t.diagnostic(`profile rows: ${names.join(", ")}`);
    assert.ok(names.length > 0);
    assert.ok(
      names.every((n) => compiled.includes(n)),
      `profile rows ${names} are not kernels the compiler wrote (${compiled})`,
    );
    assert.ok((await webviewFrame(session.page).locator(".chart-row").count()) > 0, "no bar chart");
    // The terminal has shown the job's progress; hide it so the screenshot shows the table and chart.
    await runCommand(session.page, "View: Hide Panel");
    await session.screenshot("profile.png");

    // The row's links open the user's source line and the kernel in output_code.py.
    const row = webviewFrame(session.page).locator("tr.kernel-row").first();
    const name = await row.getAttribute("data-kernel");
    const maps = session.kernelMaps().filter((m) => m.kernels.some((k) => k.name === name));
    const kernels = maps.flatMap((m) => m.kernels.filter((k) => k.name === name));
    const sourceLines = maps.flatMap((m) => m.nodes.filter((n) => kernels.some((k) => k.nodes.includes(n.name))).map((n) => n.source?.line));
    const sourceClicks = await clickUntilActiveTab(session.page, row.locator("a.source-link"), SCRIPT);
    const sourceLine = await settledCursorLine(session.page, (line) => sourceLines.includes(line));
    t.diagnostic(`${name}: source link opened ${SCRIPT}:${sourceLine}; its nodes come from lines ${[...new Set(sourceLines)]}`);
    assert.ok(sourceLines.includes(sourceLine), `the source link opened line ${sourceLine}`);
    const kernelClicks = await clickUntilActiveTab(session.page, row.locator("a.kernel-link"), "output_code.py");
    t.diagnostic(`links opened after ${sourceClicks} and ${kernelClicks} click(s)`);
    const kernelLine = await settledCursorLine(
      session.page, (line) => kernels.some((k) => k.output_code_lines[0] <= line && line <= k.output_code_lines[1]));
    assert.ok(
      kernels.some((k) => k.output_code_lines[0] <= kernelLine && kernelLine <= k.output_code_lines[1]),
      `the kernel link opened line ${kernelLine}, outside ${name}`,
    );
  }),
);

test("Check Accuracy of Current File compares compiled with eager and reports a match", { timeout: 8 * 60_000 }, (t) =>
  reporting(t, async () => {
    await openFile(session.page, SCRIPT, "def foo1");
    await clickToken(session.page, "def foo1", "foo1");
    await runCommand(session.page, "Kernel Lens: Check Accuracy of Current File");
    await waitForJobMessage(session.page, /foo1\.py compiled output matches eager/);
    const reports = session.filesNamed("accuracy.json").map((file) => JSON.parse(fs.readFileSync(file, "utf8")));
    t.diagnostic(`accuracy.json statuses: ${reports.map((r) => r.status)}`);
    assert.ok(reports.length > 0, "the check wrote no accuracy.json");
    assert.ok(reports.every((r) => r.status === "ok"));
  }),
);

test("Show Kernels for Function opens the generated kernel beside the source", { timeout: 3 * 60_000 }, (t) =>
  reporting(t, async () => {
    const page = session.page;
    await openFile(page, SCRIPT, "def foo1");
    await clickToken(page, "def foo1", "foo1");
    await runCommand(page, "Kernel Lens: Show Kernels for Function");
    // Several kernels: a quick pick asks which; one kernel opens at once.
    const ofFoo1 = session.kernelsOfFunction("foo1");
    const names = [...new Set(ofFoo1.map((k) => k.name))];
    let chosen = names[0];
    if (names.length > 1) {
      const firstRow = page.locator(".quick-input-list .monaco-list-row").first();
      await firstRow.waitFor({ timeout: 15_000 });
      const label = await firstRow.innerText();
      chosen = names.find((n) => label.includes(n));
      await page.keyboard.press("Enter");
    }
    assert.ok(chosen, "could not tell which kernel was opened");
    await waitForActiveTab(page, "output_code.py");
    assert.equal(await activeTabTitle(page), "output_code.py");
    // The cursor must sit inside the chosen kernel's lines of output_code.py (kernel_map.json, 1-based).
    const ranges = ofFoo1.filter((k) => k.name === chosen).map((k) => k.output_code_lines);
    const cursor = await settledCursorLine(page, (line) => ranges.some(([start, end]) => start <= line && line <= end));
    t.diagnostic(`opened ${chosen} at line ${cursor}; kernel_map ranges ${JSON.stringify(ranges)}`);
    assert.ok(
      ranges.some(([start, end]) => start <= cursor && cursor <= end),
      `cursor line ${cursor} is outside ${chosen}`,
    );
    await session.screenshot("kernel-beside-source.png");
  }),
);

test("a crashed language server is restarted with a visible message and answers again", { timeout: 4 * 60_000 }, (t) =>
  reporting(t, async () => {
    const page = session.page;
    const [before] = session.languageServerPids();
    assert.ok(before, "no language server running");
    process.kill(before, "SIGKILL");
    const toast = page.locator(".notifications-toasts .notification-list-item-message", { hasText: /stopped unexpectedly; restarting/ });
    await toast.first().waitFor({ timeout: 60_000 });
    t.diagnostic(await toast.first().innerText());
    const deadline = Date.now() + 60_000;
    let after = [];
    while (Date.now() < deadline && !(after.length === 1 && after[0] !== before)) {
      await page.waitForTimeout(500);
      after = session.languageServerPids();
    }
    assert.ok(after.length === 1 && after[0] !== before, `no new server after killing ${before}: ${after}`);
    await openFile(page, SCRIPT, "def foo1");
    const kernels = [...new Set(session.kernelsOfFunction("foo1").map((k) => k.name))];
    await hoverUntil(page, "def foo1", "foo1", kernels, 120_000, () => serverFailure(page));
  }),
);

test("Select Run and Show Profile switch the profile view between runs, and Reindex counts the runs", { timeout: 3 * 60_000 }, (t) =>
  reporting(t, async () => {
    const page = session.page;
    const runs = session.runs();
    const unprofiled = runs.find((run) => !run.profiled);
    const profiled = runs.find((run) => run.profiled);
    assert.ok(unprofiled && profiled, `expected a compile run and a profile run, found ${JSON.stringify(runs)}`);

    const pick = async (runId) => {
      await runCommand(page, "Kernel Lens: Select Run");
      const row = page.locator(".quick-input-list .monaco-list-row", { hasText: runId }).first();
      await row.waitFor({ timeout: 30_000 });
      assert.equal(await page.locator(".quick-input-list .monaco-list-row").count(), runs.length, "one pick per run");
      await row.click();
    };
    // Show Profile brings the panel to the front (a hidden webview has no DOM) and keeps the editor focused.
    await openFile(page, SCRIPT, "def foo1");
    await pick(unprofiled.id);
    await runCommand(page, "Kernel Lens: Show Profile");
    await webviewFrame(page).locator("text=No profile for the selected run").waitFor({ timeout: 30_000 });
    await pick(profiled.id);
    await runCommand(page, "Kernel Lens: Show Profile");
    await webviewFrame(page).locator("tr.kernel-row").first().waitFor({ timeout: 30_000 });
    assert.match(await webviewFrame(page).locator("h1").innerText(), new RegExp(profiled.id));

    await runCommand(page, "Kernel Lens: Reindex");
    const toast = page.locator(".notifications-toasts .notification-list-item-message", { hasText: /indexed \d+ run/ }).first();
    await toast.waitFor({ timeout: 30_000 });
    assert.match(await toast.innerText(), new RegExp(`indexed ${runs.length} run\\(s\\)`));
  }),
);

test("changing settings restarts the server once, with the new initialization options", { timeout: 3 * 60_000 }, (t) =>
  reporting(t, async () => {
    const page = session.page;
    const starts = () => (session.kernelLensLog().match(/Starting the server/g) ?? []).length;
    const before = starts();
    const [oldPid] = session.languageServerPids();
    // Edit settings.json in the editor as a user would: two settings changed in one save.
    const settingsFile = path.join(session.server.userDataDir, "User", "settings.json");
    const settings = JSON.parse(fs.readFileSync(settingsFile, "utf8"));
    const edited = { ...settings, "kernelLens.traceDirs": ["torch_trace", "${workspaceFolder}/more"], "kernelLens.serverEnv": { KERNEL_LENS_E2E: "1" } };
    await runCommand(page, "Preferences: Open User Settings (JSON)");
    await page.locator(".editor-group-container.active .tab.active", { hasText: "settings.json" }).waitFor({ timeout: 30_000 });
    await page.locator(".editor-group-container.active .monaco-editor .view-lines").click();
    await page.keyboard.press("Control+A");
    await page.keyboard.press("Delete");
    await page.keyboard.insertText(JSON.stringify(edited)); // one line: no auto-indent on Enter
    await page.keyboard.press("Control+S");
    const expected = JSON.stringify({
      debugRoots: [session.workspace],
      traceDirs: [path.join(session.workspace, "torch_trace"), path.join(session.workspace, "more")],
      profilerTraces: [],
      graphBreakSeverity: "warning",
      recompileSeverity: "information",
      compileFailureSeverity: "error",
      rankDivergenceSeverity: "warning",
    });
    const deadline = Date.now() + 60_000;
    while (!session.kernelLensLog().includes(`Initialization options: ${expected}`) && Date.now() < deadline) {
      await page.waitForTimeout(500);
    }
    assert.ok(session.kernelLensLog().includes(`Initialization options: ${expected}`), `no restart with ${expected}`);
    await page.waitForTimeout(2_000); // a second, undebounced restart would show up by now
    assert.equal(starts(), before + 1, "expected exactly one restart");
    const pids = session.languageServerPids();
    assert.equal(pids.length, 1);
    assert.notEqual(pids[0], oldPid);
  }),
);
