// One end-to-end session: a fresh copy of examples/, a code-server with our .vsix installed and test
// settings, and Chromium showing the workbench with foo1.py open. Also reads what the jobs wrote.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { CodeServer, ensureCodeServer, EXTENSION_ID } from "./codeServer.mjs";
import { clickToken, launchBrowser, openFile, runCommand, waitForWorkbench } from "./workbench.mjs";

export const EXTENSION_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const REPO = path.resolve(EXTENSION_DIR, "..");
export const PYTHON = process.env.KERNEL_LENS_E2E_PYTHON ?? path.join(REPO, ".venv/bin/python");
export const EXAMPLES = process.env.KERNEL_LENS_E2E_EXAMPLES ?? path.join(REPO, "examples");
export const SCREENSHOTS = path.join(REPO, "docs/screenshots");
export const VSIX = path.join(EXTENSION_DIR, "kernel-lens.vsix");
export const SCRIPT = "foo1.py";

/** User settings of the test's VS Code: quiet, no tips, our interpreter. */
function userSettings(trusted) {
  const settings = {
    "security.workspace.trust.enabled": !trusted,
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
  };
  if (!trusted) {
    // Open straight into Restricted Mode, as a user who declined to trust the folder.
    settings["security.workspace.trust.startupPrompt"] = "never";
    settings["security.workspace.trust.banner"] = "never";
  }
  return settings;
}

/** Polls `condition` until it returns a truthy value, which it returns; throws `describe()` after `timeoutMs`. */
export async function until(condition, timeoutMs, describe) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await condition();
    if (value) {
      return value;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms: ${describe()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** Every process descended from `rootPid` as {pid, line} (read from /proc). */
export function descendantProcesses(rootPid) {
  const children = new Map();
  for (const pid of fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(pid)]);
    } catch {
      // the process ended while we looked
    }
  }
  const lines = [];
  const visit = (pid) => {
    for (const child of children.get(pid) ?? []) {
      try {
        lines.push({ pid: child, line: fs.readFileSync(`/proc/${child}/cmdline`, "utf8").split("\0").join(" ").trim() });
      } catch {
        // ended
      }
      visit(child);
    }
  };
  visit(rootPid);
  return lines;
}

/** Command lines of every process descended from `rootPid`. */
export function descendantCommandLines(rootPid) {
  return descendantProcesses(rootPid).map((p) => p.line);
}

export class EditorSession {
  /**
   * @param {{ trusted: boolean, multiRoot?: boolean }} options `trusted: false` keeps workspace trust on and
   * the folder untrusted; `multiRoot` opens the folder through a `.code-workspace` file, so that folders can be
   * added without VS Code reopening the window (`addWorkspaceFolder`); `files`, more files {name: text} for the
   * workspace, written before VS Code opens it (so Quick Open finds them); `settings`, user settings over the
   * test's (say, another `kernelLens.pythonPath`); `openScript`, false to open no file (the caller opens one);
   * `prepare(workspace)`, run after the copy, before VS Code opens it (say, to add a committed run)
   */
  static async open({ trusted, multiRoot = false, files = {}, settings = {}, openScript = true, prepare = undefined }) {
    assert.ok(fs.existsSync(PYTHON), `no interpreter at ${PYTHON} (make the project's .venv first)`);
    assert.ok(fs.existsSync(path.join(EXAMPLES, SCRIPT)), `no ${SCRIPT} in ${EXAMPLES}`);
    assert.ok(fs.existsSync(VSIX), `no ${VSIX}: run npm run package first`);
    const session = new EditorSession();
    const home = ensureCodeServer(EXTENSION_DIR);
    session.root = fs.mkdtempSync(path.join(os.tmpdir(), "kernel-lens-e2e-"));
    // A copy without earlier runs: every kernel the test sees comes from this session's jobs.
    session.workspace = path.join(session.root, "examples");
    fs.cpSync(EXAMPLES, session.workspace, { recursive: true, filter: (src) => !src.includes(`${path.sep}torch_compile_debug`) });
    for (const [name, text] of Object.entries(files)) {
      fs.writeFileSync(path.join(session.workspace, name), text);
    }
    await prepare?.(session.workspace);
    session.server = new CodeServer({ home, stateDir: path.join(session.root, "code-server"), settings: { ...userSettings(trusted), ...settings } });
    const installed = session.server.installExtension(VSIX);
    assert.ok(installed.includes(EXTENSION_ID), `vsix not installed; code-server lists ${JSON.stringify(installed)}`);
    await session.server.start();
    session.browser = await launchBrowser(path.join(session.root, "chromium"));
    session.page = session.browser.pages()[0] ?? (await session.browser.newPage());
    let url = session.server.folderUrl(session.workspace);
    if (multiRoot) {
      session.workspaceFile = path.join(session.root, "kernel-lens-e2e.code-workspace");
      session.folders = [session.workspace];
      session.writeWorkspaceFile();
      url = session.server.workspaceUrl(session.workspaceFile);
    }
    await session.page.goto(url);
    await waitForWorkbench(session.page);
    if (openScript) {
      await openFile(session.page, SCRIPT, "def foo1");
    }
    return session;
  }

  writeWorkspaceFile() {
    const content = { folders: this.folders.map((folder) => ({ path: folder })), settings: this.workspaceSettings ?? {} };
    fs.writeFileSync(this.workspaceFile, JSON.stringify(content, null, 2));
  }

  /** Adds a folder to the open multi-root workspace by editing its file, as VS Code's own command does. */
  addWorkspaceFolder(folder) {
    assert.ok(this.workspaceFile, "addWorkspaceFolder needs a session opened with multiRoot: true");
    this.folders.push(folder);
    this.writeWorkspaceFile();
  }

  /** Changes the multi-root workspace's settings by editing its file, as a user saving it would. */
  updateWorkspaceSettings(changes) {
    assert.ok(this.workspaceFile, "updateWorkspaceSettings needs a session opened with multiRoot: true");
    this.workspaceSettings = { ...this.workspaceSettings, ...changes };
    this.writeWorkspaceFile();
  }

  /** Pids of the language servers this code-server's extension host runs. */
  languageServerPids() {
    return descendantProcesses(this.server.child.pid)
      .filter((p) => /-m lsp_server\b/.test(p.line))
      .map((p) => p.pid);
  }

  /** Absolute paths of the files called `name` the jobs wrote under torch_compile_debug/. */
  filesNamed(name) {
    const debugRoot = path.join(this.workspace, "torch_compile_debug");
    if (!fs.existsSync(debugRoot)) {
      return [];
    }
    return fs
      .readdirSync(debugRoot, { recursive: true })
      .filter((file) => path.basename(file) === name)
      .map((file) => path.join(debugRoot, file));
  }

  /** Every kernel_map.json the compiler wrote into the workspace, parsed. */
  kernelMaps() {
    return this.filesNamed("kernel_map.json").map((file) => JSON.parse(fs.readFileSync(file, "utf8")));
  }

  /** The run folders the jobs wrote: [{id, profiled}], oldest first. */
  runs() {
    const debugRoot = path.join(this.workspace, "torch_compile_debug");
    return fs
      .readdirSync(debugRoot)
      .filter((name) => name.startsWith("run_"))
      .sort()
      .map((id) => ({
        id,
        profiled: this.filesNamed("profile.json").some((file) => file.startsWith(path.join(debugRoot, id, path.sep))),
      }));
  }

  compiledKernelNames() {
    return [...new Set(this.kernelMaps().flatMap((map) => map.kernels.map((k) => k.name)))];
  }

  /** The kernels (with their output_code.py line ranges) built from nodes whose source is in `fn`. */
  kernelsOfFunction(fn) {
    return this.kernelMaps().flatMap((map) => {
      const functionOf = new Map(map.nodes.map((node) => [node.name, node.source?.function]));
      return map.kernels.filter((k) => k.nodes.some((node) => functionOf.get(node) === fn));
    });
  }

  /** Waits for a notification matching `text` (a job's closing message); fails at once on a Kernel Lens failure
   * message. */
  async waitForToast(text, timeoutMs = 5 * 60_000) {
    const toasts = this.page.locator(".notifications-toasts .notification-list-item-message");
    await until(async () => {
      const texts = await toasts.allInnerTexts();
      const bad = texts.find((t) => t.includes("Kernel Lens") && /failed|rejected|exited with code|cancelled/.test(t));
      assert.equal(bad, undefined, `job failed: ${bad}`);
      return texts.some((t) => text.test(t));
    }, timeoutMs, () => `no "${text}" notification`);
  }

  /** Opens `name`, puts the cursor on `word` of the line holding `lineText`, compiles the file from the palette
   * and waits for the job's message. */
  async compileFile(name, lineText, word) {
    await openFile(this.page, name, lineText);
    await clickToken(this.page, lineText, word);
    await runCommand(this.page, "Kernel Lens: Compile Current File");
    await this.waitForToast(new RegExp(`${name.replace(".", "\\.")} compiled`));
  }

  /** Runs a test's `body`; on failure adds the logs and a screenshot to the test's output. */
  async reporting(t, body) {
    try {
      await body();
    } catch (error) {
      t.diagnostic(this.failureReport());
      t.diagnostic(`screenshot of the failure: ${await this.failureScreenshot(t.name)}`);
      throw error;
    }
  }

  /** Our output channel's log as the extension host wrote it (empty before activation). */
  kernelLensLog() {
    return this.logs(/^Kernel Lens\.log$/, Infinity); // whole: tests count lines in it
  }

  /** Logs for a failure report: ours, the extension host's, code-server's. */
  failureReport() {
    return `${this.logs(/Kernel Lens\.log|exthost\.log/, 4000)}\n--- code-server\n${this.server.logTail()}`;
  }

  /** Each log whose file name matches, its last `tailChars` characters. */
  logs(namePattern, tailChars) {
    const found = [];
    const walk = (dir) => {
      for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
        const full = path.join(dir, entry.name);
        if (entry.isDirectory()) walk(full);
        else if (namePattern.test(entry.name)) found.push(`--- ${full}\n${fs.readFileSync(full, "utf8").slice(-tailChars)}`);
      }
    };
    try {
      walk(path.join(this.server.userDataDir, "logs"));
    } catch {
      // no logs yet
    }
    return found.join("\n");
  }

  async screenshot(name) {
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    await this.page.screenshot({ path: path.join(SCREENSHOTS, name) });
  }

  /** Saves the page as it is now beside the session's state; returns the file. */
  async failureScreenshot(testName) {
    const file = path.join(this.root, `failure-${testName.replace(/[^a-z0-9]+/gi, "-").slice(0, 60)}.png`);
    await this.page?.screenshot({ path: file }).catch(() => undefined);
    return file;
  }

  async close() {
    await this.browser?.close().catch(() => undefined);
    await this.server?.stop();
    if (this.root && !process.env.KERNEL_LENS_E2E_KEEP && !process.exitCode) {
      fs.rmSync(this.root, { recursive: true, force: true });
    }
  }
}
