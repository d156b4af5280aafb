// Runs a real VS Code (code-server, built by scripts/setup-code-server.sh) for the end-to-end test:
// installs our .vsix into a fresh extensions dir, writes user settings, serves a folder on 127.0.0.1.
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";

export const EXTENSION_ID = "kernel-lens.kernel-lens";

/** Builds code-server if the cache lacks a complete build; returns its folder. */
export function ensureCodeServer(extensionDir) {
  const out = execFileSync("bash", [path.join(extensionDir, "scripts/setup-code-server.sh")], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  });
  return out.trim().split("\n").pop();
}

function freePort() {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.unref();
    probe.on("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

async function waitForHttp(url, timeoutMs, child) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      throw new Error(`code-server exited with code ${child.exitCode} before serving ${url}`);
    }
    try {
      const response = await fetch(url, { redirect: "manual" });
      if (response.status < 500) {
        return;
      }
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`code-server did not answer ${url} within ${timeoutMs} ms`);
}

export class CodeServer {
  /**
   * @param {object} options
   * @param {string} options.home code-server's built package folder
   * @param {string} options.stateDir a fresh folder for user data, extensions and logs
   * @param {Record<string, unknown>} options.settings user settings.json content
   */
  constructor({ home, stateDir, settings }) {
    this.home = home;
    this.userDataDir = path.join(stateDir, "user-data");
    this.extensionsDir = path.join(stateDir, "extensions");
    this.configFile = path.join(stateDir, "config.yaml");
    this.logFile = path.join(stateDir, "code-server.log");
    fs.mkdirSync(path.join(this.userDataDir, "User"), { recursive: true });
    fs.mkdirSync(this.extensionsDir, { recursive: true });
    fs.writeFileSync(path.join(this.userDataDir, "User", "settings.json"), JSON.stringify(settings, null, 2));
    fs.writeFileSync(this.configFile, "auth: none\ncert: false\n");
    this.child = undefined;
    this.url = undefined;
  }

  commonArgs() {
    return ["--config", this.configFile, "--extensions-dir", this.extensionsDir, "--user-data-dir", this.userDataDir];
  }

  /** `code-server --install-extension x.vsix`; returns the installed extensions' ids. */
  installExtension(vsix) {
    const entry = path.join(this.home, "out/node/entry.js");
    execFileSync(process.execPath, [entry, ...this.commonArgs(), "--install-extension", vsix], { stdio: ["ignore", "pipe", "pipe"] });
    const listed = execFileSync(process.execPath, [entry, ...this.commonArgs(), "--list-extensions"], { encoding: "utf8" });
    return listed.split("\n").map((s) => s.trim()).filter(Boolean);
  }

  async start() {
    const port = await freePort();
    const log = fs.openSync(this.logFile, "a");
    this.child = spawn(
      process.execPath,
      [
        path.join(this.home, "out/node/entry.js"),
        ...this.commonArgs(),
        "--auth", "none",
        "--bind-addr", `127.0.0.1:${port}`,
        "--disable-telemetry",
        "--disable-update-check",
        "--disable-getting-started-override",
      ],
      { stdio: ["ignore", log, log], detached: true },
    );
    this.url = `http://127.0.0.1:${port}`;
    await waitForHttp(`${this.url}/healthz`, 60_000, this.child);
    return this.url;
  }

  folderUrl(folder) {
    return `${this.url}/?folder=${encodeURIComponent(folder)}`;
  }

  /** The workbench opened on a multi-root workspace (a `.code-workspace` file). */
  workspaceUrl(workspaceFile) {
    return `${this.url}/?workspace=${encodeURIComponent(workspaceFile)}`;
  }

  async stop() {
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null) {
      return;
    }
    const exited = new Promise((resolve) => child.once("exit", resolve));
    try {
      process.kill(-child.pid, "SIGTERM"); // its whole process group: extension host, language server
    } catch {
      child.kill("SIGTERM");
    }
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        // already gone
      }
    }, 5000);
    await exited;
    clearTimeout(timer);
  }

  logTail(chars = 4000) {
    try {
      return fs.readFileSync(this.logFile, "utf8").slice(-chars);
    } catch {
      return "";
    }
  }
}
