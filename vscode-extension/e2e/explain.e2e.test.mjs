// End-to-end test of issue 33 in a real VS Code (code-server + Chromium): a program whose compile makes
// decisions worth explaining (a fusion refused by max_fusion_size, a scalar argmax loop, an ATen GEMM) is
// compiled and profiled from the palette; the editor then explains them on the user's lines (diagnostics,
// hover, the max_fusion_size quick fix), links source and generated lines both ways in the kernel view with
// the prelude folded, and shows each line's cost (inlay ms, the heat gutter, the profile's lines by cost).
// Saves why.png, linked.png and cost.png under docs/screenshots/.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { EditorSession, EXTENSION_DIR, SCREENSHOTS, until } from "./session.mjs";
import { clickToken, editorLine, openFile, runCommand, webviewFrame } from "./workbench.mjs";

const DEMO = "why_demo.py";
const PROGRAM = `import torch
import compiler

compiler.config.max_fusion_size = 2


def normalize(x, w):
    a = torch.neg(x)
    b = a * 2 + 1
    c = b.amax(dim=1, keepdim=True)
    d = torch.mm(b - c, w)
    return d, x.argmax(dim=1)


if __name__ == "__main__":
    torch.manual_seed(0)
    compiled = torch.compile(normalize, backend="lens")
    compiled(torch.randn(512, 256), torch.randn(256, 64))
`;
let session;

/** A screenshot for the READMEs: docs/screenshots/ and the extension's media/ (packaged into the .vsix). */
async function screenshot(name) {
  await session.screenshot(name);
  fs.mkdirSync(path.join(EXTENSION_DIR, "media"), { recursive: true });
  fs.copyFileSync(path.join(SCREENSHOTS, name), path.join(EXTENSION_DIR, "media", name));
}

/** Clicks (or hovers) a line of the active editor a few characters into its text (tokens split by
 * decorations make single-token locators unreliable). */
async function pointAtLine(page, lineText, click = true) {
  const line = editorLine(page, lineText);
  // The editor re-renders its lines while groups open and focus moves: wait for one that stays on screen.
  const box = await until(async () => {
    await line.waitFor({ timeout: 30_000 });
    return line.boundingBox();
  }, 30_000, () => `no line "${lineText}" on screen`);
  const x = box.x + 70;
  const y = box.y + box.height / 2;
  if (click) {
    await page.mouse.click(x, y);
  } else {
    await page.mouse.move(x, y, { steps: 3 });
  }
}

/** Hovers a line until the hover shows `expected`; returns the hover's text. */
async function hoverLineUntil(page, lineText, expected, timeoutMs) {
  const hover = page.locator(".monaco-hover-content:visible").first();
  let last = "";
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    await page.mouse.move(5, 5);
    await page.keyboard.press("Escape");
    await pointAtLine(page, lineText, false);
    try {
      await hover.waitFor({ state: "visible", timeout: 5_000 });
      last = await hover.innerText();
      if (last.includes(expected)) {
        return last;
      }
    } catch {
      // no hover yet
    }
    await page.waitForTimeout(2_000);
  }
  throw new Error(`the hover on "${lineText}" never showed "${expected}"; last: ${JSON.stringify(last)}`);
}

/** A locator's text as rendered, with the CSS-injected text of decorations and inlay hints (`::before` and
 * `::after` content, which innerText leaves out). */
function renderedText(locator) {
  return locator.evaluate((root) => {
    const injected = [];
    for (const el of root.querySelectorAll("span")) {
      for (const pseudo of ["::before", "::after"]) {
        const content = getComputedStyle(el, pseudo).content;
        if (content && content !== "none" && content !== "normal") {
          injected.push(content.replace(/^"|"$/g, ""));
        }
      }
    }
    return `${root.innerText} ${injected.join(" ")}`.replace(/\u00a0/g, " ");
  });
}

/** How many gutter marks (decorations with an SVG data image) the editor group shows. */
function gutterMarks(group) {
  return group.locator("div.margin[role='presentation']").first().evaluate(
    (margin) => [...margin.querySelectorAll("div")].filter((el) => getComputedStyle(el).backgroundImage.includes("data:image/svg")).length,
  );
}

/** The editor group (not the active one) showing `title`, as a locator of its editor. */
function groupShowing(page, title) {
  return page.locator(".editor-group-container", { has: page.locator(".tab.active .label-name", { hasText: title }) }).first();
}

before(async () => {
  session = await EditorSession.open({ trusted: true, files: { [DEMO]: PROGRAM } });
  await session.compileFile(DEMO, "def normalize", "normalize");
});

after(async () => {
  await session?.close();
});

test("the compiler's decisions are explained on the user's lines, with a quick fix", { timeout: 6 * 60_000 }, (t) =>
  session.reporting(t, async () => {
    const page = session.page;
    const records = session.filesNamed("why.json").flatMap((f) => JSON.parse(fs.readFileSync(f, "utf8")).records);
    assert.ok(records.some((r) => r.reason === "max_fusion_size"), `why.json: ${JSON.stringify(records)}`);
    // The hover on the amax line: the refused fusion, in words, and its fix.
    const hover = await hoverLineUntil(page, "c = b.amax", "did not join", 180_000);
    t.diagnostic(`hover: ${hover.replace(/\s+/g, " ").slice(0, 300)}`);
    assert.match(hover, /Why/);
    assert.match(hover, /over compiler\.config\.max_fusion_size = 2/);
    assert.match(hover, /argmax|max loop runs scalar|Set compiler\.config\.max_fusion_size = 4/);
    await screenshot("why.png");
    // The Problems panel lists the information diagnostics by code.
    await page.mouse.move(5, 5);
    await page.keyboard.press("Escape");
    await runCommand(page, "View: Focus Problems (Errors, Warnings, Infos)");
    const problems = page.locator(".markers-panel .monaco-list-row");
    await until(async () => (await problems.allInnerTexts()).some((r) => /did not join/.test(r)), 60_000, () => "no not-fused problem");
    assert.ok((await problems.allInnerTexts()).some((r) => /argmax loop runs scalar/.test(r)), "no not-vectorized problem");
    await runCommand(page, "View: Hide Panel");
    // The quick fix on the amax line rewrites the setting the file already has.
    await pointAtLine(page, "c = b.amax");
    await page.keyboard.press("Control+.");
    await page.getByText("Set compiler.config.max_fusion_size = 4", { exact: true }).filter({ visible: true }).first().waitFor({ timeout: 30_000 });
    await page.keyboard.press("Enter");
    await editorLine(page, "compiler.config.max_fusion_size = 4").waitFor({ timeout: 15_000 });
    assert.equal(await page.locator(".editor-group-container.active .view-line", { hasText: "max_fusion_size = 2" }).count(), 0);
    await page.keyboard.press("Control+Z");
    await editorLine(page, "compiler.config.max_fusion_size = 2").waitFor({ timeout: 15_000 });
    await page.keyboard.press("Control+S");
  }),
);

test("the kernel view links source and generated lines both ways, prelude folded", { timeout: 4 * 60_000 }, (t) =>
  session.reporting(t, async () => {
    const page = session.page;
    await openFile(page, DEMO, "def normalize");
    // (the cursor on a line without generated lines: the kernel side opens at its top, where the fold is, and
    // stays there until the cursor moves to a compiled line)
    await pointAtLine(page, "def normalize(x, w):");
    await runCommand(page, "Kernel Lens: Open Kernel View (linked lines)");
    const kernelGroup = groupShowing(page, "output_code.py");
    await kernelGroup.waitFor({ timeout: 30_000 });
    // The prelude (hundreds of lines before the first kernel) is one folded region: a kernel shows near the top.
    await kernelGroup.locator(".margin-view-overlays .codicon-folding-collapsed").first().waitFor({ timeout: 30_000 });
    // Cursor on a source line: the kernel side labels and outlines the lines it became.
    await pointAtLine(page, "b = a * 2 + 1");
    const kernelLines = kernelGroup.locator(".view-lines").first();
    await until(async () => (await renderedText(kernelLines)).includes(`◀ ${DEMO}:9`), 15_000, () => "no ◀ label in the kernel view");
    await screenshot("linked.png");
    // And back: a generated line labels the source line it came from.
    const generated = kernelGroup.locator(".view-line", { hasText: "auto tmp" }).first();
    const box = await generated.boundingBox();
    await page.mouse.click(box.x + 120, box.y + box.height / 2);
    const sourceLines = groupShowing(page, DEMO).locator(".view-lines").first();
    const back = await until(async () => (await renderedText(sourceLines)).match(/▶ output_code\.py:\d+/), 15_000, () => "no ▶ label in the source");
    t.diagnostic(`linked back: ${back[0]}`);
  }),
);

test("each line's cost: ms in the inlay hints, the heat gutter, the profile's lines by cost", { timeout: 8 * 60_000 }, (t) =>
  session.reporting(t, async () => {
    const page = session.page;
    await runCommand(page, "View: Close All Editor Groups"); // the kernel view's: one editor beside the profile
    await openFile(page, DEMO, "def normalize");
    await clickToken(page, "def normalize", "normalize");
    await runCommand(page, "Kernel Lens: Profile Current File");
    await session.waitForToast(/why_demo\.py profiled/);
    const lines = webviewFrame(page).locator("tr.line-row");
    await lines.first().waitFor({ timeout: 60_000 });
    const rows = await lines.allInnerTexts();
    t.diagnostic(`lines by cost: ${rows.slice(0, 3).join(" | ")}`);
    assert.ok(rows.every((r) => r.includes(`${DEMO}:`)), "a line row of another file");
    assert.ok((await webviewFrame(page).locator(".measures").allInnerTexts()).some((m) => /median wall time/.test(m)));
    await runCommand(page, "View: Hide Panel");
    await openFile(page, DEMO, "def normalize");
    const source = groupShowing(page, DEMO);
    // Inlay hints: the line's share and time per iteration first (VS Code cuts a hint at 43 characters), then its kernel.
    await until(async () => /\d+\.\d% · \d+\.\d+ (ms|µs) → cpp_fused_\w+/.test(await renderedText(source.locator(".view-line", { hasText: "c = b.amax" }).first())),
      90_000, () => "no inlay hint with ms on the amax line");
    // The heat gutter marks the compiled lines.
    await until(async () => (await gutterMarks(source)) >= 3, 60_000, () => "no heat marks in the gutter");
    await screenshot("cost.png");
  }),
);
