/** Asks the Python extension (ms-python.python), when installed, which interpreter the user selected,
 * and tells us when that selection changes. */

import * as vscode from "vscode";
import { PYTHON_EXTENSION_ID } from "./constants";

/** The slice of the Python extension's public API we use (its `environments` API). */
interface EnvironmentPath {
  id: string;
  path: string;
}
interface ResolvedEnvironment {
  executable: { uri?: vscode.Uri };
}
interface PythonExtensionApi {
  environments?: {
    getActiveEnvironmentPath(resource?: vscode.Uri): EnvironmentPath;
    resolveEnvironment(environment: EnvironmentPath | string): Promise<ResolvedEnvironment | undefined>;
    onDidChangeActiveEnvironmentPath: vscode.Event<unknown>;
  };
}

async function pythonExtensionApi(): Promise<PythonExtensionApi | undefined> {
  const extension = vscode.extensions.getExtension<PythonExtensionApi>(PYTHON_EXTENSION_ID);
  if (!extension) {
    return undefined;
  }
  try {
    return extension.isActive ? extension.exports : await extension.activate();
  } catch {
    return undefined;
  }
}

/** The executable of the selected environment, or undefined without the Python extension. */
export async function selectedPythonInterpreter(resource?: vscode.Uri): Promise<string | undefined> {
  const environments = (await pythonExtensionApi())?.environments;
  if (!environments) {
    return undefined;
  }
  try {
    const resolved = await environments.resolveEnvironment(environments.getActiveEnvironmentPath(resource));
    return resolved?.executable.uri?.fsPath;
  } catch {
    return undefined;
  }
}

/** Calls `listener` when the user picks another interpreter in the Python extension. */
export async function onDidChangePythonInterpreter(listener: () => void): Promise<vscode.Disposable> {
  const environments = (await pythonExtensionApi())?.environments;
  return environments ? environments.onDidChangeActiveEnvironmentPath(listener) : new vscode.Disposable(() => undefined);
}
