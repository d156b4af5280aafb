// End-to-end test of notebooks: cells run in a real Jupyter kernel (run_notebook.py: ipykernel, LENS_DEBUG=1)
// compile with backend="lens"; the saved notebook opened in code-server's notebook editor gets the server's
// hover and code lens on the compiled cell's own lines, matched to the kernel's per-cell file by the cell's text,
// and keeps them after the cell is edited.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import path from "node:path";
import { after, before, test } from "node:test";
import { EditorSession, PYTHON } from "./session.mjs";
import { clickToken, editorLine, hoverUntil, NOTEBOOK_CELLS, openFile } from "./workbench.mjs";

const CELLS = [
  "import torch",
  ["def mlp(x, w):", "    h = x @ w", "    return torch.relu(h) * 2", "", 'torch.compile(mlp, backend="lens")(torch.randn(8, 16), torch.randn(16, 4)).shape'].join("\n"),
];
let session;

before(async () => {
  session = await EditorSession.open({ trusted: true, openScript: false });
  execFileSync(PYTHON, [path.join(import.meta.dirname, "run_notebook.py"), session.workspace, "cells", JSON.stringify(CELLS)], { stdio: "ignore" });
});

after(async () => {
  await session?.close();
});

test("a notebook cell compiled in a Jupyter kernel gets its kernels on hover and code lens", { timeout: 6 * 60_000 }, (t) =>
  session.reporting(t, async () => {
    const kernels = session.compiledKernelNames();
    assert.ok(kernels.some((name) => name.includes("relu")), JSON.stringify(kernels));
    await openFile(session.page, "cells.ipynb", "def mlp", NOTEBOOK_CELLS);
    const relu = kernels.filter((name) => name.includes("relu"));
    const hover = await hoverUntil(session.page, "def mlp", "mlp", relu, 180_000, undefined, NOTEBOOK_CELLS);
    assert.match(hover, /`?mlp`? compiled into/);
    t.diagnostic(`hover: ${hover.replace(/\s+/g, " ").slice(0, 160)}`);
    const lens = session.page.locator(".notebook-editor .codelens-decoration", { hasText: "kernel" }).first();
    await lens.waitFor({ timeout: 60_000 });
    t.diagnostic(`code lens: ${await lens.innerText()}`);
    await session.screenshot("notebook-hover.png");

    // edited since it ran (a line typed above the def): the cell keeps its kernels, matched by its lines' texts
    await clickToken(session.page, "def mlp", "def", NOTEBOOK_CELLS);
    await session.page.keyboard.press("Home");
    await session.page.keyboard.type("# tuned later\n");
    await editorLine(session.page, "# tuned later", NOTEBOOK_CELLS).waitFor({ timeout: 30_000 });
    const after = await hoverUntil(session.page, "def mlp", "mlp", relu, 60_000, undefined, NOTEBOOK_CELLS);
    assert.match(after, /`?mlp`? compiled into/);
  }),
);
