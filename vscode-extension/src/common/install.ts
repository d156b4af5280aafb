/** The one-step install, decided without `vscode`: what the chosen interpreter has (a probe it runs), whether
 * to offer the kernel-lens wheel the .vsix carries, the words of the offer, and pip's command line. The glue
 * (`installOffer.ts`) asks the user; nothing here installs anything. */

import * as path from "path";
import { CommandLine, Interpreter } from "./interpreter";

/** Run as `<python> -c PROBE` from the workspace folder (where the server would start): one JSON line. */
export const PROBE = [
  "import importlib.util, json, sys",
  "from importlib import metadata",
  "def version(name):",
  "    try:",
  "        return metadata.version(name)",
  "    except metadata.PackageNotFoundError:",
  "        return None",
  "print(json.dumps({'python': sys.version.split()[0], 'executable': sys.executable,",
  "                  'kernel_lens': version('kernel-lens'), 'torch': version('torch'),",
  "                  'server': importlib.util.find_spec('lsp_server') is not None}))",
].join("\n");

export interface Probe {
  python: string;
  executable: string;
  /** The installed distribution's version, null without one (a source checkout may still import the server). */
  kernelLens: string | null;
  torch: string | null;
  /** Whether `python -m lsp_server` would find the server. */
  server: boolean;
}

/** The probe's answer, or undefined when the output is not its JSON line (an interpreter that is not Python). */
export function parseProbe(stdout: string): Probe | undefined {
  const line = stdout.trim().split("\n").pop() ?? "";
  try {
    const raw = JSON.parse(line);
    if (typeof raw !== "object" || raw === null || typeof raw.python !== "string" || typeof raw.server !== "boolean") {
      return undefined;
    }
    const text = (value: unknown) => (typeof value === "string" ? value : null);
    return { python: raw.python, executable: text(raw.executable) ?? "", kernelLens: text(raw.kernel_lens), torch: text(raw.torch), server: raw.server };
  } catch {
    return undefined;
  }
}

/** The wheel the .vsix carries (`wheels/kernel_lens-<version>-py3-none-any.whl`), the highest version if several. */
export function bundledWheel(fileNames: string[]): string | undefined {
  const wheels = fileNames.filter((name) => /^kernel_lens-[^-]+-py3-none-any\.whl$/.test(path.basename(name)));
  const version = (name: string) => path.basename(name).split("-")[1].split(".").map((part) => Number.parseInt(part, 10) || 0);
  wheels.sort((a, b) => {
    const [x, y] = [version(a), version(b)];
    for (let i = 0; i < Math.max(x.length, y.length); i++) {
      if ((x[i] ?? 0) !== (y[i] ?? 0)) {
        return (x[i] ?? 0) - (y[i] ?? 0);
      }
    }
    return 0;
  });
  return wheels.pop();
}

export type InstallDecision =
  | { kind: "ready" }
  | { kind: "offer"; message: string; wheel: string }
  | { kind: "cannot"; message: string };

export const INSTALL = "Install";
export const NOT_NOW = "Not Now";
export const OPEN_SETTING = "Choose Interpreter";

/** Whether the server can start in this interpreter, else what to offer (never an install without a wheel). */
export function decideInstall(probe: Probe, interpreter: Interpreter, wheel: string | undefined): InstallDecision {
  if (probe.server) {
    return { kind: "ready" };
  }
  const where = `${interpreter.command} (Python ${probe.python})`;
  if (wheel === undefined) {
    return { kind: "cannot", message: `Kernel Lens: kernel-lens is not installed in ${where}. Install it there (pip install kernel-lens) or set kernelLens.pythonPath to an interpreter that has it.` };
  }
  const torch = probe.torch !== null ? `It has torch ${probe.torch}.` : "It has no torch: pip will download torch as well (a large download).";
  const version = path.basename(wheel).split("-")[1];
  return {
    kind: "offer",
    wheel,
    message: `Kernel Lens: kernel-lens is not installed in ${where}. ${torch} Install kernel-lens ${version} there with pip, from the wheel this extension carries?`,
  };
}

/** `<python> -m pip install <wheel>`, in that interpreter (its own pip: a virtual environment's, not the system's). */
export function pipInstallLine(interpreter: Interpreter, wheel: string): CommandLine {
  return { command: interpreter.command, args: ["-m", "pip", "install", "--disable-pip-version-check", wheel] };
}

/** The words after pip finished: what it installed, or its last lines. */
export function installOutcome(exitCode: number | null, outputTail: string, after: Probe | undefined): { ok: boolean; message: string } {
  if (exitCode === 0 && after?.server) {
    const version = after.kernelLens !== null ? ` ${after.kernelLens}` : "";
    return { ok: true, message: `Kernel Lens: installed kernel-lens${version} into ${after.executable}; starting the server.` };
  }
  const tail = outputTail.trim().split("\n").slice(-3).join(" ");
  const why = exitCode === 0 ? "pip finished, but the server still cannot be imported" : `pip exited with code ${exitCode}`;
  return { ok: false, message: `Kernel Lens: installing kernel-lens failed (${why}): ${tail}` };
}
