// End-to-end test of workspace trust: in an untrusted (Restricted Mode) workspace the extension
// activates but runs nothing: no language server, no compiler job, no Kernel Lens commands, and none
// after the workspace's folders or the server's settings change.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { descendantCommandLines, EditorSession, until } from "./session.mjs";
import { quickInput } from "./workbench.mjs";

const REFUSED = /Untrusted workspace: the server was not started/g;
let session;

function pythonProcesses() {
  return descendantCommandLines(session.server.child.pid).filter((line) => /-m (lsp_server|compiler)\b/.test(line));
}

/** The extension's log once `done(log)` holds or it logged a server start (which the caller then rejects). */
function logWhen(done, what) {
  return until(
    () => {
      const log = session.kernelLensLog();
      return (done(log) || /Starting the server/.test(log)) && log;
    },
    60_000,
    () => `${what}; log so far:\n${session.kernelLensLog()}`,
  );
}

const refusals = (log) => (log.match(REFUSED) ?? []).length;

/** Rows the command palette shows once it has answered `query`: each names it, or is VS Code's "similar
 *  commands" or "No matching commands" entry. The unfiltered list, on screen a moment after typing, has neither. */
async function paletteRowsFor(page, query) {
  await quickInput(page, ">", query);
  const rows = page.locator(".quick-input-list .monaco-list-row");
  const answers = (row) => row.toLowerCase().includes(query.toLowerCase()) || /similar commands|No matching commands/.test(row);
  try {
    return await until(
      async () => {
        const texts = await rows.allInnerTexts();
        return texts.length > 0 && texts.every(answers) && texts;
      },
      30_000,
      () => `the palette never listed rows for "${query}"`,
    );
  } finally {
    await page.keyboard.press("Escape");
  }
}

before(async () => {
  session = await EditorSession.open({ trusted: false, multiRoot: true });
});

after(async () => {
  await session?.close();
});

test("an untrusted workspace starts no server and offers no Kernel Lens command", { timeout: 3 * 60_000 }, async (t) => {
  // Our extension activates on the open Python file and logs that it runs nothing.
  const log = await logWhen((text) => text.includes("Untrusted workspace"), "the extension never said it runs nothing");
  t.diagnostic(log);
  assert.match(log, /Untrusted workspace: Kernel Lens runs nothing/);
  assert.doesNotMatch(log, /Starting the server/);

  const processes = descendantCommandLines(session.server.child.pid);
  assert.ok(processes.some((line) => /extensionHost|bootstrap-fork/.test(line)), `no extension host among ${processes}`);
  assert.deepEqual(pythonProcesses(), []);

  const offered = await paletteRowsFor(session.page, "Kernel Lens");
  assert.deepEqual(offered.filter((row) => row.includes("Kernel Lens:")), [], `palette offers ${offered}`);
  assert.equal(fs.existsSync(path.join(session.workspace, "torch_compile_debug")), false);
});

test("adding a folder or changing a setting in an untrusted workspace starts no server", { timeout: 3 * 60_000 }, async (t) => {
  const second = path.join(session.root, "second");
  fs.mkdirSync(second);
  fs.writeFileSync(path.join(second, "other.py"), "import torch\n");
  const before = refusals(session.kernelLensLog());

  // A restart is debounced: the refusal (or, wrongly, a start) is logged after the change settles.
  session.addWorkspaceFolder(second);
  let log = await logWhen((text) => refusals(text) > before, "no answer to the added folder");
  assert.doesNotMatch(log, /Starting the server/);
  assert.match(log, /Workspace folders changed/);
  assert.deepEqual(pythonProcesses(), []);

  // A setting the server restarts for, in the workspace's own settings (an untrusted workspace may bring them).
  session.updateWorkspaceSettings({ "kernelLens.graphBreakSeverity": "error" });
  log = await logWhen((text) => refusals(text) > before + 1, "no answer to the changed setting");
  t.diagnostic(log);
  assert.doesNotMatch(log, /Starting the server/);
  assert.match(log, /Settings changed/);
  assert.deepEqual(pythonProcesses(), []);
  assert.equal(fs.existsSync(path.join(second, "torch_compile_debug")), false);
});
