// End-to-end test of "Compare Runs…" in a real VS Code (code-server + Chromium): compile foo1.py twice with
// different fusion limits, compare the runs from the palette and check the diff editor shows both sides'
// kernels. The expected entries come from the compiler's own `diff --json` of the same two runs.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { after, before, test } from "node:test";
import { EditorSession, PYTHON, SCRIPT } from "./session.mjs";
import { runCommand } from "./workbench.mjs";

let session;

function python(args, env = {}) {
  const result = spawnSync(PYTHON, args, { cwd: session.workspace, env: { ...process.env, ...env }, encoding: "utf8", timeout: 5 * 60_000 });
  assert.ok(result.status === 0 || result.status === 1, `${args.join(" ")} exited ${result.status}: ${result.stderr}`);
  return result.stdout;
}

/** The text the active diff editor shows on one side ("original" or "modified"). */
async function diffSide(page, side) {
  const lines = page.locator(`.editor-group-container.active .monaco-diff-editor .editor.${side} .view-lines`).first();
  await lines.waitFor({ timeout: 30_000 });
  return (await lines.innerText()).replace(/\u00a0/g, " ");
}

before(async () => {
  session = await EditorSession.open({ trusted: true });
});

after(async () => {
  await session?.close();
});

test("Compare Runs… opens the diff editor between two runs' changed kernels", { timeout: 8 * 60_000 }, async (t) => {
  try {
    const page = session.page;
    python(["-m", "compiler", "compile", SCRIPT], { LENS_MAX_FUSION_SIZE: "64" });
    python(["-m", "compiler", "compile", SCRIPT], { LENS_MAX_FUSION_SIZE: "2" });
    const [a, b] = session.runs().map((run) => run.id);
    assert.ok(a && b, "the two compiles wrote fewer than two runs");
    const debugRoot = path.join(session.workspace, "torch_compile_debug");
    const diff = JSON.parse(python(["-m", "compiler", "diff", path.join(debugRoot, a), path.join(debugRoot, b), "--json"]));
    const offered = diff.graphs.flatMap((g) => g.kernels).filter((k) => k.change !== "same");
    const changed = offered.filter((k) => k.a.length > 0 && k.b.length > 0);
    assert.ok(changed.length > 0, "LENS_MAX_FUSION_SIZE=2 fused nothing differently");
    const entry = changed[0];
    const label = `${entry.change}: ${entry.a.join(", ")} → ${entry.b.join(", ")}`;
    t.diagnostic(`comparing ${a} with ${b}: ${label}`);

    await runCommand(page, "Kernel Lens: Reindex");
    await page.locator(".notifications-toasts .notification-list-item-message", { hasText: "indexed 2 run(s)" }).first().waitFor({ timeout: 60_000 });
    await runCommand(page, "Kernel Lens: Compare Runs");
    for (const runId of [a, b]) {
      const row = page.locator(".quick-input-list .monaco-list-row", { hasText: runId }).first();
      await row.waitFor({ timeout: 30_000 });
      await row.click();
    }
    // One changed entry opens at once; several: a quick pick of "change: A kernels → B kernels".
    if (offered.length > 1) {
      const row = page.locator(".quick-input-list .monaco-list-row", { hasText: label }).first();
      await row.waitFor({ timeout: 60_000 });
      await row.click();
    }
    const original = await diffSide(page, "original");
    const modified = await diffSide(page, "modified");
    t.diagnostic(`A: ${original.slice(0, 120)}\nB: ${modified.slice(0, 120)}`);
    assert.ok(original.includes(`${entry.a[0]}(`), `the A side does not show ${entry.a[0]}`);
    assert.ok(modified.includes(`${entry.b[0]}(`), `the B side does not show ${entry.b[0]}`);
    const tab = await page.locator(".editor-group-container.active .tab.active").innerText();
    assert.ok(tab.includes(entry.change), `tab title ${tab}`);
  } catch (error) {
    t.diagnostic(session?.failureReport() ?? "no session");
    t.diagnostic(`screenshot of the failure: ${await session?.failureScreenshot(t.name)}`);
    throw error;
  }
});
