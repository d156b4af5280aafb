/** "Compare Runs…": pick two runs, ask the server for `kernelLens.diffRuns`, pick a changed kernel group and
 * open VS Code's diff editor between the two runs' kernel code, served as virtual `kernel-lens-diff:` documents. */

import * as vscode from "vscode";
import { ServerCommands } from "../common/constants";
import { KernelSpan, RunDiffResult, RunSummary } from "../common/protocol";
import { runDescription } from "../common/runLabel";
import { KernelLensServer } from "../common/server";
import { changedChoices, DiffChoice, sideText } from "./runDiff";

export const DIFF_SCHEME = "kernel-lens-diff";

/** Thrown when there is nothing to compare: shown as a message. */
export class CompareRefused extends Error {}

/** Holds the text of each side shown so far; VS Code asks for it by URI. */
export class KernelDiffDocuments implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly texts = new Map<string, string>();
  private readonly registration = vscode.workspace.registerTextDocumentContentProvider(DIFF_SCHEME, this);
  private next = 0;

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.toString()) ?? "# Kernel Lens: this comparison is no longer available; run Compare Runs… again.\n";
  }

  /** A fresh virtual document holding `text`, named after the run and its kernels. */
  add(runId: string, kernelNames: string[], text: string): vscode.Uri {
    const name = (kernelNames.join("+") || "none").slice(0, 120);
    const uri = vscode.Uri.from({ scheme: DIFF_SCHEME, path: `/${runId}/${name}.py`, query: `n=${this.next++}` });
    this.texts.set(uri.toString(), text);
    return uri;
  }

  dispose(): void {
    this.registration.dispose();
    this.texts.clear();
  }
}

async function readFiles(spans: KernelSpan[]): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  for (const uri of new Set(spans.map((s) => s.uri))) {
    try {
      files.set(uri, new TextDecoder().decode(await vscode.workspace.fs.readFile(vscode.Uri.parse(uri))));
    } catch {
      // a run deleted since indexing: sideText says the code was not found
    }
  }
  return files;
}

async function pickRunId(runs: RunSummary[], placeHolder: string): Promise<string | undefined> {
  const items = runs.map((run) => ({ label: run.id, description: runDescription(run), detail: run.time }));
  return (await vscode.window.showQuickPick(items, { placeHolder, matchOnDescription: true }))?.label;
}

export async function compareRuns(server: KernelLensServer, documents: KernelDiffDocuments): Promise<void> {
  const runs = (await server.executeCommand<RunSummary[]>(ServerCommands.listRuns)) ?? [];
  if (runs.length < 2) {
    throw new CompareRefused(`Kernel Lens: comparing needs two runs; ${runs.length} indexed. Compile the file again (e.g. after a change).`);
  }
  // Runs come newest first: offer the older run as A.
  const a = await pickRunId([...runs].reverse(), "Compare: the first run (A, usually the older)");
  if (!a) {
    return;
  }
  const b = await pickRunId(runs.filter((run) => run.id !== a), `Compare ${a} with which run (B)?`);
  if (!b) {
    return;
  }
  const result = await server.executeCommand<RunDiffResult>(ServerCommands.diffRuns, { a, b });
  if (!result || "error" in result) {
    throw new CompareRefused(`Kernel Lens: could not compare the runs: ${result?.error ?? "no answer"}`);
  }
  const choices = changedChoices(result);
  if (choices.length === 0) {
    void vscode.window.showInformationMessage(
      result.changed ? `Kernel Lens: ${a} and ${b} have the same kernels (their graphs or outputs differ).` : `Kernel Lens: no differences between ${a} and ${b}.`,
    );
    return;
  }
  const chosen: DiffChoice | undefined =
    choices.length === 1 ? choices[0] : await vscode.window.showQuickPick(choices, { placeHolder: "Show which changed kernels?", matchOnDescription: true });
  if (!chosen) {
    return;
  }
  const { entry } = chosen;
  const files = await readFiles([...entry.a_locations, ...entry.b_locations]);
  const left = documents.add(result.a_run, entry.a, sideText(entry.a, entry.a_locations, files));
  const right = documents.add(result.b_run, entry.b, sideText(entry.b, entry.b_locations, files));
  await vscode.commands.executeCommand("vscode.diff", left, right, `${chosen.label} (A ↔ B)`, { preview: true });
}
