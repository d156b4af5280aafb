/** The install offer's glue: before the server starts, the chosen interpreter is probed; without kernel-lens the
 * user is asked (never silently) whether to pip-install the wheel the .vsix carries into it, and the server starts
 * once it is there. Reached only from the server's start, which `ServerLifecycle` makes only in a trusted
 * workspace: in an untrusted one nothing is probed or installed. Decisions and words: `install.ts`. */

import { execFile, spawn } from "child_process";
import * as fs from "fs";
import * as path from "path";
import * as vscode from "vscode";
import { bundledWheel, decideInstall, INSTALL, installOutcome, NOT_NOW, OPEN_SETTING, parseProbe, pipInstallLine, Probe, PROBE } from "./install";
import { describeInterpreter, Interpreter } from "./interpreter";

const PROBE_TIMEOUT_MS = 60_000;
const OUTPUT_TAIL_CHARS = 4000;

/** Runs the probe in `interpreter` from `cwd`; undefined when it cannot run or does not answer as Python. */
export function runProbe(interpreter: Interpreter, cwd: string | undefined): Promise<Probe | undefined> {
  return new Promise((resolve) => {
    execFile(interpreter.command, ["-c", PROBE], { cwd, timeout: PROBE_TIMEOUT_MS }, (error, stdout) => {
      resolve(error ? undefined : parseProbe(stdout));
    });
  });
}

export class InstallOffer {
  /** Interpreters asked about this session (asked again after "Restart Server" or a failed install). */
  private readonly asked = new Set<string>();

  constructor(
    private readonly output: vscode.LogOutputChannel,
    private readonly wheelDir: string,
    private readonly installed: () => void,
  ) {}

  forgetAsked(): void {
    this.asked.clear();
  }

  /** Whether the server can start in `interpreter` now; when not, the offer is shown (not awaited). */
  async ready(interpreter: Interpreter, cwd: string | undefined): Promise<boolean> {
    const probe = await runProbe(interpreter, cwd);
    if (probe === undefined) {
      return true; // not a Python that answers: the start says what went wrong
    }
    this.output.info(`Interpreter ${probe.executable}: Python ${probe.python}, kernel-lens ${probe.kernelLens ?? "not installed"}, torch ${probe.torch ?? "not installed"}`);
    const decision = decideInstall(probe, interpreter, bundledWheel(this.wheels()));
    if (decision.kind === "ready") {
      return true;
    }
    this.output.warn(`The server was not started: ${decision.message}`);
    if (!this.asked.has(interpreter.command)) {
      this.asked.add(interpreter.command); // one question per interpreter until answered and restarted
      void this.ask(decision, interpreter, cwd);
    }
    return false;
  }

  private wheels(): string[] {
    try {
      return fs.readdirSync(this.wheelDir).map((name) => path.join(this.wheelDir, name));
    } catch {
      return [];
    }
  }

  private async ask(decision: ReturnType<typeof decideInstall>, interpreter: Interpreter, cwd: string | undefined): Promise<void> {
    if (decision.kind === "cannot") {
      void vscode.window.showErrorMessage(decision.message);
      return;
    }
    if (decision.kind !== "offer") {
      return;
    }
    const choice = await vscode.window.showWarningMessage(decision.message, INSTALL, OPEN_SETTING, NOT_NOW);
    if (choice === OPEN_SETTING) {
      await vscode.commands.executeCommand("workbench.action.openSettings", "kernelLens.pythonPath");
      return;
    }
    if (choice !== INSTALL) {
      this.output.info(`Install of kernel-lens into ${describeInterpreter(interpreter)} declined.`);
      return;
    }
    const outcome = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Kernel Lens: installing kernel-lens into ${interpreter.command}` },
      () => this.install(interpreter, decision.wheel, cwd),
    );
    if (outcome.ok) {
      void vscode.window.showInformationMessage(outcome.message);
      this.asked.delete(interpreter.command);
      this.installed();
    } else {
      this.output.error(outcome.message);
      void vscode.window.showErrorMessage(outcome.message);
    }
  }

  private install(interpreter: Interpreter, wheel: string, cwd: string | undefined): Promise<{ ok: boolean; message: string }> {
    const line = pipInstallLine(interpreter, wheel);
    this.output.info(`Running ${line.command} ${line.args.join(" ")}`);
    return new Promise((resolve) => {
      let tail = "";
      const child = spawn(line.command, line.args, { cwd, env: { ...process.env, PYTHONUNBUFFERED: "1" } });
      const collect = (chunk: Buffer) => {
        const text = chunk.toString();
        this.output.info(text.trimEnd());
        tail = (tail + text).slice(-OUTPUT_TAIL_CHARS);
      };
      child.stdout.on("data", collect);
      child.stderr.on("data", collect);
      child.on("error", (error) => resolve(installOutcome(null, String(error), undefined)));
      child.on("close", async (code) => resolve(installOutcome(code, tail, code === 0 ? await runProbe(interpreter, cwd) : undefined)));
    });
  }
}
