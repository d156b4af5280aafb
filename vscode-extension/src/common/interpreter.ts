/** Chooses the Python interpreter and builds the command lines of the server and of the compiler's jobs.
 * Pure: the Python extension's answer is passed in by `python.ts`. */

import * as path from "path";
import { COMPILER_MODULE, DEFAULT_PYTHON, SERVER_MODULE } from "./constants";
import { JobKind } from "./protocol";

export type InterpreterSource = "setting" | "python-extension" | "default";

export interface Interpreter {
  command: string;
  source: InterpreterSource;
}

export interface CommandLine {
  command: string;
  args: string[];
  cwd?: string;
}

/** Our own setting wins, then the Python extension's selected environment, then `python3` on PATH. */
export function chooseInterpreter(settingPath: string | undefined, pythonExtensionPath: string | undefined): Interpreter {
  const candidates: Array<[string | undefined, InterpreterSource]> = [
    [settingPath, "setting"],
    [pythonExtensionPath, "python-extension"],
  ];
  for (const [command, source] of candidates) {
    if (command && command.trim() !== "") {
      return { command: command.trim(), source };
    }
  }
  return { command: DEFAULT_PYTHON, source: "default" };
}

export function describeInterpreter(interpreter: Interpreter): string {
  const origin: Record<InterpreterSource, string> = {
    setting: "from kernelLens.pythonPath",
    "python-extension": "from the Python extension's selected environment",
    default: "default: no setting and no Python extension environment",
  };
  return `${interpreter.command} (${origin[interpreter.source]})`;
}

export function serverCommandLine(interpreter: Interpreter): CommandLine {
  return { command: interpreter.command, args: ["-m", SERVER_MODULE] };
}

/** `python -m compiler <kind> <file>` run from the script's folder, so its debug dir lands beside it. */
export function jobCommandLine(interpreter: Interpreter, kind: JobKind, scriptPath: string): CommandLine {
  return { command: interpreter.command, args: ["-m", COMPILER_MODULE, kind, scriptPath], cwd: path.dirname(scriptPath) };
}
