/** Runs `python -m compiler <kind> <file>` as a VS Code task: the user watches it in a terminal while a
 * cancellable progress notification is shown; resolves to the exit code (undefined if cancelled). */

import * as path from "path";
import * as vscode from "vscode";
import { EXTENSION_NAME } from "./constants";
import { Interpreter, jobCommandLine } from "./interpreter";
import { JOB_SPECS } from "./jobs";
import { JobKind } from "./protocol";

/** Declared in package.json `taskDefinitions`. */
export const TASK_TYPE = "kernelLens";
let nextTaskId = 0;

export interface JobRequest {
  kind: JobKind;
  script: vscode.Uri;
  interpreter: Interpreter;
  env: Record<string, string>;
}

export async function runJobTask(request: JobRequest): Promise<number | undefined> {
  const spec = JOB_SPECS[request.kind];
  const line = jobCommandLine(request.interpreter, request.kind, request.script.fsPath);
  const id = `${Date.now()}-${nextTaskId++}`;
  const scope = vscode.workspace.getWorkspaceFolder(request.script) ?? vscode.TaskScope.Workspace;
  const title = `${spec.verb} ${path.basename(request.script.fsPath)}`;
  const task = new vscode.Task(
    { type: TASK_TYPE, job: request.kind, file: request.script.fsPath, id },
    scope,
    title,
    EXTENSION_NAME,
    new vscode.ProcessExecution(line.command, line.args, { cwd: line.cwd, env: { ...request.env, PYTHONUNBUFFERED: "1" } }),
  );
  task.presentationOptions = {
    reveal: vscode.TaskRevealKind.Always,
    panel: vscode.TaskPanelKind.Dedicated,
    clear: true,
    focus: false,
    showReuseMessage: false,
  };
  const isOurs = (execution: vscode.TaskExecution): boolean => execution.task.definition.id === id;

  return vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `${EXTENSION_NAME}: ${title}…`, cancellable: true },
    (_progress, cancellation) =>
      new Promise<number | undefined>((resolve, reject) => {
        const subscriptions: vscode.Disposable[] = [];
        const finish = (code: number | undefined): void => {
          subscriptions.forEach((s) => s.dispose());
          resolve(code);
        };
        // Subscribe before starting: a fast job could end before executeTask returns.
        subscriptions.push(
          vscode.tasks.onDidEndTaskProcess((e) => isOurs(e.execution) && finish(e.exitCode)),
          // Ends without a process end event when the process could not start or was terminated.
          vscode.tasks.onDidEndTask((e) => isOurs(e.execution) && setTimeout(() => finish(undefined), 200)),
        );
        vscode.tasks.executeTask(task).then(
          (execution) => subscriptions.push(cancellation.onCancellationRequested(() => execution.terminate())),
          (error) => {
            subscriptions.forEach((s) => s.dispose());
            reject(error);
          },
        );
      }),
  );
}
