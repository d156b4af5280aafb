// End-to-end test of workspace trust: in an untrusted (Restricted Mode) workspace the extension
// activates but runs nothing: no language server, no compiler job, no Kernel Lens commands.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { descendantCommandLines, EditorSession } from "./session.mjs";
import { quickInput } from "./workbench.mjs";

let session;

before(async () => {
  session = await EditorSession.open({ trusted: false });
});

after(async () => {
  await session?.close();
});

test("an untrusted workspace starts no server and offers no Kernel Lens command", { timeout: 3 * 60_000 }, async (t) => {
  const page = session.page;
  // Our extension activates on the open Python file and logs that it runs nothing.
  const deadline = Date.now() + 60_000;
  while (!session.kernelLensLog().includes("Untrusted workspace") && Date.now() < deadline) {
    await page.waitForTimeout(500);
  }
  const log = session.kernelLensLog();
  t.diagnostic(log);
  assert.match(log, /Untrusted workspace: Kernel Lens runs nothing/);
  assert.doesNotMatch(log, /Starting the server/);

  const processes = descendantCommandLines(session.server.child.pid);
  assert.ok(processes.some((line) => /extensionHost|bootstrap-fork/.test(line)), `no extension host among ${processes}`);
  assert.deepEqual(processes.filter((line) => /-m (lsp_server|compiler)\b/.test(line)), []);

  await quickInput(page, ">", "Kernel Lens");
  await page.waitForTimeout(1_000);
  const offered = await page.locator(".quick-input-list .monaco-list-row").allInnerTexts();
  await page.keyboard.press("Escape");
  assert.deepEqual(offered.filter((row) => row.includes("Kernel Lens:")), [], `palette offers ${offered}`);
  assert.equal(fs.existsSync(path.join(session.workspace, "torch_compile_debug")), false);
});
