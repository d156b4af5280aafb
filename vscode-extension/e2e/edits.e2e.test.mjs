// End-to-end test in a real VS Code (code-server + Chromium): answers follow the user's edits (issue 45). After a
// compile, two lines typed at the top of foo1.py (unsaved) move every line down by two; hovering a moved line must
// still show the kernel its own code became, never the kernel of the line that used to be there.
// Run: npm run test:e2e --workspace vscode-extension
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { EditorSession, SCRIPT } from "./session.mjs";
import { clickToken, hoverUntil } from "./workbench.mjs";

let session;

before(async () => {
  session = await EditorSession.open({ trusted: true });
});

after(async () => {
  await session?.close();
});

/** The kernels built from nodes whose user source line holds `code` (from the run's kernel_map.json files). */
function kernelsOfLine(code) {
  return [...new Set(session.kernelMaps().flatMap((map) => {
    const nodes = new Set(map.nodes.filter((n) => n.source?.code?.includes(code)).map((n) => n.name));
    return map.kernels.filter((k) => k.nodes.some((n) => nodes.has(n))).map((k) => k.name);
  }))];
}

test("after lines are typed above a compiled function, a moved line's hover still shows its own kernel", { timeout: 10 * 60_000 }, async (t) => {
  try {
    await session.compileFile(SCRIPT, "def foo1", "foo1");
    const softmax = kernelsOfLine("p = torch.softmax(s, dim=-1)");
    const foo1 = kernelsOfLine("y = torch.cat([b], dim=1)");
    assert.ok(softmax.length > 0 && foo1.length > 0, "the compile wrote no kernels for the two lines");
    assert.ok(!softmax.some((k) => foo1.includes(k)), "the two lines' kernels must differ for this test to mean anything");
    await hoverUntil(session.page, "p = torch.softmax(s, dim=-1)", "dim", softmax, 180_000);

    // Two new lines at the very top, not saved: every line below moves down by two.
    await clickToken(session.page, "import torch", "import");
    await session.page.keyboard.press("Control+Home");
    await session.page.keyboard.type("import math\nimport os\n");
    const moved = await hoverUntil(session.page, "y = torch.cat([b], dim=1)", "dim", foo1, 120_000);
    assert.ok(!softmax.some((k) => moved.includes(k)), `the moved line showed another line's kernel: ${moved}`);
    const movedSoftmax = await hoverUntil(session.page, "p = torch.softmax(s, dim=-1)", "dim", softmax, 120_000);
    assert.ok(!foo1.some((k) => movedSoftmax.includes(k)), `the moved softmax line showed foo1's kernel: ${movedSoftmax}`);
  } catch (error) {
    t.diagnostic(session?.failureReport() ?? "no session");
    t.diagnostic(`screenshot of the failure: ${await session?.failureScreenshot(t.name)}`);
    throw error;
  }
});
