/** Entry point of the Kernel Lens extension: a thin client that starts the Python language server, wires
 * the palette commands and the profile view, and restarts the server when its inputs change. */

import * as path from "path";
import * as vscode from "vscode";
import { registerCommands } from "./commands";
import { CONFIG_SECTION, EXTENSION_NAME, Commands } from "./common/constants";
import { InstallOffer } from "./common/installOffer";
import { chooseInterpreter, Interpreter } from "./common/interpreter";
import { onDidChangePythonInterpreter, selectedPythonInterpreter } from "./common/python";
import { KernelLensServer } from "./common/server";
import { KernelLensSettings, readSettings, RESTART_SETTINGS } from "./common/settings";
import { KernelDiffDocuments } from "./views/diffView";
import { KernelView } from "./views/kernelView";
import { LineHeat } from "./views/lineHeat";
import { ProfileView } from "./views/profileView";

let server: KernelLensServer | undefined;

function folderPaths(): string[] {
  return (vscode.workspace.workspaceFolders ?? []).map((folder) => folder.uri.fsPath);
}

/** The folder a resource belongs to, else the first workspace folder. */
function folderOf(resource?: vscode.Uri): vscode.WorkspaceFolder | undefined {
  return (resource && vscode.workspace.getWorkspaceFolder(resource)) ?? vscode.workspace.workspaceFolders?.[0];
}

function settingsFor(resource?: vscode.Uri): KernelLensSettings {
  const folder = folderOf(resource);
  return readSettings(vscode.workspace.getConfiguration(CONFIG_SECTION, folder?.uri), folder?.uri.fsPath, folderPaths());
}

async function interpreterFor(resource?: vscode.Uri): Promise<Interpreter> {
  const folder = folderOf(resource);
  return chooseInterpreter(settingsFor(resource).pythonPath, await selectedPythonInterpreter(folder?.uri));
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel(EXTENSION_NAME, { log: true });
  // The wheel `npm run package` puts in the .vsix: offered for an interpreter without kernel-lens.
  const installOffer = new InstallOffer(output, path.join(context.extensionPath, "wheels"), () => void server?.start());
  server = new KernelLensServer(output, {
    isTrusted: () => vscode.workspace.isTrusted,
    interpreter: () => interpreterFor(),
    settings: () => settingsFor(),
    workspaceFolder: () => folderOf()?.uri.fsPath,
    canStart: (interpreter) => installOffer.ready(interpreter, folderOf()?.uri.fsPath),
    forgetAsked: () => installOffer.forgetAsked(),
  });
  const running = server;
  const profileView = new ProfileView(running, async () => {
    await vscode.commands.executeCommand(Commands.pickRun);
  });

  const diffDocuments = new KernelDiffDocuments();
  const kernelView = new KernelView(running);
  const lineHeat = new LineHeat(running);
  let heatTimer: NodeJS.Timeout | undefined;
  // The server republishes diagnostics after each index change: the moment to redraw the cost gutter.
  const redrawHeat = () => {
    clearTimeout(heatTimer);
    heatTimer = setTimeout(() => void lineHeat.refresh(), 300);
  };

  context.subscriptions.push(
    output,
    running,
    profileView,
    diffDocuments,
    kernelView,
    lineHeat,
    ...registerCommands({ server: running, profileView, diffDocuments, kernelView, lineHeat, interpreterFor, settingsFor }),
    // A restarted server has a fresh index: redraw an open profile and the cost gutter from it.
    running.onDidChangeRunning((isRunning) => isRunning && (void profileView.refresh(), redrawHeat())),
    vscode.languages.onDidChangeDiagnostics(redrawHeat),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (RESTART_SETTINGS.some((key) => event.affectsConfiguration(`${CONFIG_SECTION}.${key}`))) {
        output.info("Settings changed: restarting the server.");
        running.scheduleRestart();
      }
    }),
    vscode.workspace.onDidChangeWorkspaceFolders(() => {
      output.info("Workspace folders changed: restarting the server.");
      running.scheduleRestart();
    }),
    await onDidChangePythonInterpreter(() => {
      output.info("The Python extension's interpreter changed: restarting the server.");
      running.scheduleRestart();
    }),
  );

  // Starting the server runs an interpreter the workspace may choose: only once the user trusts it. The
  // server refuses every start before that too, so the restarts wired above start nothing either.
  if (!vscode.workspace.isTrusted) {
    output.info("Untrusted workspace: Kernel Lens runs nothing until the workspace is trusted.");
    context.subscriptions.push(vscode.workspace.onDidGrantWorkspaceTrust(() => void running.start()));
    return;
  }
  void running.start();
}

export async function deactivate(): Promise<void> {
  await server?.stop();
  server = undefined;
}
