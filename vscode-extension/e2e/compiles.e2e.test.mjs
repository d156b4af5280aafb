// End-to-end test of the compiles views in a real VS Code (code-server + Chromium): a program whose function
// breaks the graph at a print, inlined from two calls and recompiled for a second size, is compiled from the
// palette (its TORCH_TRACE log written by the job); "Show Graph Breaks" lists that break once with how many
// frames and compiles hit it and opens its line, and "Show Compiles…" says for each compile where it was
// called from, the torch.compile that wrapped it and the settings in force, and opens the call.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { EditorSession, until } from "./session.mjs";
import { clickToken, cursorLine, openFile, runCommand, settledCursorLine } from "./workbench.mjs";

const DEMO = "breaks_demo.py";
const PROGRAM = `import torch
import compiler

compiler.config.max_fusion_size = 2


def scale(x):
    y = torch.sin(x) * 2
    print("halfway")
    return torch.cos(y) + 1


def both(x):
    return scale(x) + scale(x * 2)


if __name__ == "__main__":
    compiled = torch.compile(both, backend="lens")
    compiled(torch.randn(64))
    compiled(torch.randn(96))
`;
/** 1-based lines of PROGRAM. */
const lineOf = (text) => PROGRAM.split("\n").findIndex((line) => line.includes(text)) + 1;
const PRINT_LINE = lineOf('print("halfway")');
const COMPILE_LINE = lineOf("torch.compile(both");
const FIRST_CALL_LINE = lineOf("compiled(torch.randn(64))");
let session;

/** Runs a palette command that opens a quick pick until its list shows a row with `rowText` (the server indexes
 * the job's trace log a moment after the job ends); returns that row. */
async function pickShowing(page, command, rowText) {
  const row = page.locator(".quick-input-list .monaco-list-row", { hasText: rowText }).first();
  await until(async () => {
    await runCommand(page, command);
    try {
      await row.waitFor({ timeout: 5_000 });
      return true;
    } catch {
      await page.keyboard.press("Escape"); // not indexed yet: try again
      return false;
    }
  }, 90_000, () => `no "${rowText}" in ${command}`);
  return row;
}

/** Clicks a pick's row and waits for the editor's cursor to land on the 1-based `line`. */
async function openRow(page, row, line) {
  await row.click();
  const landed = await settledCursorLine(page, (at) => at === line, 15_000);
  assert.equal(landed, line, `the pick did not open line ${line}`);
}

before(async () => {
  session = await EditorSession.open({ trusted: true, files: { [DEMO]: PROGRAM } });
  await session.compileFile(DEMO, "def both", "both");
});

after(async () => {
  await session?.close();
});

test("Show Graph Breaks lists a break once with the frames and compiles that hit it, and opens its line", { timeout: 3 * 60_000 }, (t) =>
  session.reporting(t, async () => {
    const page = session.page;
    await openFile(page, DEMO, "def both");
    // Ctrl+Home goes where the focus is: the compile's terminal or its notification may hold it, so the key is
    // pressed again after a click into the editor until the cursor is on line 1
    await until(async () => {
      await page.keyboard.press("Control+Home");
      if ((await cursorLine(page)) === 1) {
        return true;
      }
      await clickToken(page, "def both", "both");
      return false;
    }, 20_000, () => "the cursor did not move to line 1");
    const place = `${DEMO}:${PRINT_LINE}`;
    const row = await pickShowing(page, "Kernel Lens: Show Graph Breaks", place);
    const rows = await page.locator(".quick-input-list .monaco-list-row").allInnerTexts();
    t.diagnostic(`graph breaks: ${rows.map((r) => r.replace(/\s+/g, " ")).join(" | ")}`);
    // Both calls inline scale() and its resume frame runs again: one break, many frames and compiles.
    assert.equal(rows.filter((r) => r.includes(place)).length, 1, "the print's break is listed more than once");
    const text = (await row.innerText()).replace(/\s+/g, " ");
    // The row's text runs its label ("reason — file:line") into its description ("3 frames · 6 compiles").
    const [, frames, compiles] = new RegExp(`— ${place.replace(".", "\\.")} ?(\\d+) frames · (\\d+) compiles`).exec(text) ?? [];
    assert.ok(Number(frames) >= 2 && Number(compiles) > Number(frames), `counts: ${text}`);
    assert.match(text, /in both, scale/);
    await openRow(page, row, PRINT_LINE);
  }),
);

test("the compiles picker says each compile's call, its torch.compile line and the settings in force", { timeout: 3 * 60_000 }, (t) =>
  session.reporting(t, async () => {
    const page = session.page;
    const compile = await pickShowing(page, "Kernel Lens: Show Compiles…", "[0/0] both");
    const text = (await compile.innerText()).replace(/\s+/g, " ");
    t.diagnostic(`compile: ${text}`);
    assert.match(text, /compiled · \d+ ops · \d+ guards · 1 graph break/);
    assert.ok(text.includes(`called from ${DEMO}:${FIRST_CALL_LINE}`), `no call site in: ${text}`);
    assert.ok(text.includes(`torch.compile at ${DEMO}:${COMPILE_LINE}`), `no torch.compile line in: ${text}`);
    await openRow(page, compile, FIRST_CALL_LINE);
    // The debug directory's graphs carry the compiler.config settings not at their default.
    await pickShowing(page, "Kernel Lens: Show Compiles…", "[0/0] both");
    await page.locator(".quick-input-widget input.input").fill("max_fusion_size");
    const graph = page.locator(".quick-input-list .monaco-list-row", { hasText: "debug directory" }).filter({ hasText: /\] scale/ }).first();
    await graph.waitFor({ timeout: 10_000 });
    const graphText = (await graph.innerText()).replace(/\s+/g, " ");
    t.diagnostic(`graph: ${graphText}`);
    assert.ok(graphText.includes("settings: compiler.config.max_fusion_size = 2"), `no settings in: ${graphText}`);
    // A graph has no Dynamo stack: choosing it opens its function.
    await openRow(page, graph, lineOf("def scale("));
  }),
);
