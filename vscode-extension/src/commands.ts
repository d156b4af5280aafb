/** The palette commands (`kernelLens.*`): run compiler jobs on the current file, open kernels beside the
 * source, choose a run or a compile, list graph breaks, profile a real Inductor run, reindex, show the profile,
 * restart the server. All answers come from the server. */

import * as path from "path";
import * as vscode from "vscode";
import { Commands, ServerCommands } from "./common/constants";
import { Interpreter } from "./common/interpreter";
import { runJobTask } from "./common/jobTask";
import { profileInductorOutcome, profileInductorRequest } from "./common/inductorProfile";
import { benchmarkOutcome } from "./common/kernelBenchmark";
import { JOB_SPECS, jobOutcome, MessageLevel } from "./common/jobs";
import { KernelTarget, parseKernelTarget } from "./common/kernelTarget";
import {
  CompileSummary, GraphBreaks, JobKind, JobResult, KernelLocation, ReindexResult, RunSummary,
} from "./common/protocol";
import { BenchmarkKernelResult } from "./common/protocolGpu";
import { runDescription, runDetail, runName } from "./common/runLabel";
import { KernelLensServer } from "./common/server";
import { KernelLensSettings } from "./common/settings";
import { compileItem, guardItems } from "./views/compilePick";
import { graphBreakItem } from "./views/graphBreakPick";
import { formatMs } from "./views/profileHtml";
import { revealLocation } from "./views/editorLocation";
import { compareRuns, KernelDiffDocuments } from "./views/diffView";
import { KernelView } from "./views/kernelView";
import { LineHeat } from "./views/lineHeat";
import { ProfileView } from "./views/profileView";

export interface CommandServices {
  server: KernelLensServer;
  profileView: ProfileView;
  kernelView: KernelView;
  lineHeat: LineHeat;
  diffDocuments: KernelDiffDocuments;
  interpreterFor(resource: vscode.Uri): Promise<Interpreter>;
  settingsFor(resource: vscode.Uri): KernelLensSettings;
}

const SHOW: Record<MessageLevel, (text: string, ...items: string[]) => Thenable<string | undefined>> = {
  info: vscode.window.showInformationMessage,
  warning: vscode.window.showWarningMessage,
  error: vscode.window.showErrorMessage,
};

/** Thrown for a user's mistake (no file open, …): shown as a message, never logged as a failure. */
class CommandRefused extends Error {}

function requireTrust(): void {
  if (!vscode.workspace.isTrusted) {
    throw new CommandRefused("Kernel Lens runs nothing in an untrusted workspace. Trust the workspace to use this command.");
  }
}

/** The active editor's Python file, saved so the job runs what the user sees. */
async function currentPythonFile(): Promise<vscode.TextEditor> {
  const editor = vscode.window.activeTextEditor;
  if (!editor || editor.document.uri.scheme !== "file" || editor.document.languageId !== "python") {
    throw new CommandRefused("Kernel Lens: open a Python file on disk first.");
  }
  if (editor.document.isDirty && !(await editor.document.save())) {
    throw new CommandRefused("Kernel Lens: the file could not be saved.");
  }
  return editor;
}

async function runJob(services: CommandServices, kind: JobKind): Promise<void> {
  requireTrust();
  const script = (await currentPythonFile()).document.uri;
  const exitCode = await runJobTask({
    kind,
    script,
    interpreter: await services.interpreterFor(script),
    env: services.settingsFor(script).serverEnv,
  });
  // The watcher usually sees new runs first; reindexing makes sure before we read the results.
  if (services.server.isRunning) {
    await services.server.executeCommand<ReindexResult>(ServerCommands.reindex);
    await services.lineHeat.refresh();
  }
  const outcome = jobOutcome(kind, path.basename(script.fsPath), exitCode);
  if (outcome.succeeded && JOB_SPECS[kind].opensProfile) {
    await services.profileView.show();
  }
  void SHOW[outcome.level](outcome.text);
}

/** Real Inductor's own `output_code.py -p` on the active file's run (else the current run), through the server
 * (`kernelLens.profileInductor`, which reindexes after it): its category breakdown then shows in the profile view. */
async function profileInductorRun(services: CommandServices): Promise<void> {
  requireTrust();
  const request = profileInductorRequest(vscode.window.activeTextEditor?.document.uri.toString());
  const result = await services.server.executeCommand<JobResult>(ServerCommands.profileInductor, request);
  const outcome = profileInductorOutcome(result);
  if (outcome.succeeded) {
    await services.lineHeat.refresh();
    await services.profileView.show();
  }
  void SHOW[outcome.level](outcome.text);
}

/** The cursor's Triton kernel (a line of it in an output_code.py) benchmarked by the server on this machine's GPU:
 * its standalone module as compiled and as max-autotune compiles it, side by side; without a GPU, the server
 * says so and what was recorded. */
async function benchmarkTritonKernel(services: CommandServices): Promise<void> {
  requireTrust();
  const target = await cursorTarget();
  const result = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: "Kernel Lens: benchmarking the kernel (as compiled, then max-autotune)…" },
    () => services.server.executeCommand<BenchmarkKernelResult>(ServerCommands.benchmarkKernel, { ...target, maxAutotune: true }));
  const outcome = benchmarkOutcome(result);
  void SHOW[outcome.level](outcome.text);
}

async function cursorTarget(): Promise<KernelTarget> {
  const editor = await currentPythonFile();
  return { uri: editor.document.uri.toString(), line: editor.selection.active.line };
}

function kernelPickItem(kernel: KernelLocation): vscode.QuickPickItem & { kernel: KernelLocation } {
  const time = kernel.time_ms === null || kernel.time_ms === undefined ? "" : ` · ${formatMs(kernel.time_ms)} ms`;
  return { label: kernel.name, description: `${kernel.kind} · ${kernel.graph_id}${time}`, detail: runName(kernel.run_id, kernel.rank_label), kernel };
}

/** The kernels of `argument`'s line when a code lens passes `{uri, line}`, else of the cursor's line. */
async function showKernelsForFunction(services: CommandServices, argument?: unknown): Promise<void> {
  requireTrust();
  const target: KernelTarget = parseKernelTarget(argument) ?? (await cursorTarget());
  const line = target.line;
  const kernels = await services.server.executeCommand<KernelLocation[]>(ServerCommands.kernelsAt, target);
  if (!kernels || kernels.length === 0) {
    throw new CommandRefused(`Kernel Lens: no kernel comes from line ${line + 1}. Compile the file first (Kernel Lens: Compile Current File).`);
  }
  const chosen =
    kernels.length === 1
      ? kernels[0]
      : (await vscode.window.showQuickPick(kernels.map(kernelPickItem), { placeHolder: "Open which kernel?", matchOnDescription: true }))?.kernel;
  if (chosen) {
    await revealLocation(chosen.uri, chosen.line, vscode.ViewColumn.Beside);
  }
}

export async function pickRun(services: Pick<CommandServices, "server" | "profileView">): Promise<void> {
  requireTrust();
  const runs = await services.server.executeCommand<RunSummary[]>(ServerCommands.listRuns);
  if (!runs || runs.length === 0) {
    throw new CommandRefused("Kernel Lens: no runs indexed yet. Compile or profile a file first.");
  }
  const items = runs.map((run) => ({
    label: `${run.selected ? "$(check) " : ""}${run.id}`,
    description: runDescription(run),
    detail: runDetail(run),
    run,
  }));
  const picked = await vscode.window.showQuickPick(items, { placeHolder: "Select the run whose kernels Kernel Lens shows" });
  if (picked) {
    await services.server.executeCommand(ServerCommands.selectRun, picked.run.id);
    await services.profileView.showSelectedRun();
  }
}

/** The pickers' filter reads an item's description and detail too (file names, settings, reasons). */
const MATCH_EVERY_LINE = { matchOnDescription: true, matchOnDetail: true };

/** The server's list for the active file, else (when that is empty) for every file; refused with `none` when
 * both are empty. */
async function activeFileElseAll<T>(list: (scope: { uri?: string }) => Promise<T[] | undefined>, none: string): Promise<T[]> {
  const uri = vscode.window.activeTextEditor?.document.uri.toString();
  for (const scope of uri ? [{ uri }, {}] : [{}]) {
    const found = await list(scope);
    if (found && found.length > 0) {
      return found;
    }
  }
  throw new CommandRefused(none);
}

const GUARDS_BUTTON: vscode.QuickInputButton = { iconPath: new vscode.ThemeIcon("shield"), tooltip: "Show its guards" };

/** A quick pick whose items may carry a button: resolves to the accepted item, or runs `onButton` with the item
 * whose button was pressed (the pick closes either way). */
function pickWithButton<T extends vscode.QuickPickItem>(items: T[], placeholder: string, onButton: (item: T) => void): Promise<T | undefined> {
  const pick = vscode.window.createQuickPick<T>();
  pick.items = items;
  pick.placeholder = placeholder;
  pick.matchOnDescription = true;
  pick.matchOnDetail = true;
  return new Promise((resolve) => {
    let chosen: T | undefined;
    pick.onDidAccept(() => {
      chosen = pick.selectedItems[0];
      pick.hide();
    });
    pick.onDidTriggerItemButton((event) => {
      pick.hide();
      onButton(event.item);
    });
    pick.onDidHide(() => {
      pick.dispose();
      resolve(chosen);
    });
    pick.show();
  });
}

/** The compiles of the active file (all files when it has none): choosing one opens the call that triggered it;
 * its shield button lists its guards (the one a later call failed marked), choosing one opens its line. */
async function pickCompile(services: CommandServices): Promise<void> {
  requireTrust();
  const compiles = await activeFileElseAll(
    (scope) => services.server.executeCommand<CompileSummary[]>(ServerCommands.listCompiles, scope),
    "Kernel Lens: no compiles recorded. Compile the file (its TORCH_TRACE log lists them).",
  );
  const items = compiles.map((c) => {
    const item = compileItem(c);
    return (c.guard_list ?? []).length > 0 || (c.recompile_causes ?? []).length > 0 ? { ...item, buttons: [GUARDS_BUTTON] } : item;
  });
  const picked = await pickWithButton(items, "Dynamo compiles: frame, compile id, call site, why it recompiled (shield: its guards)", (item) =>
    void pickGuard(item.compile).catch((error) => void vscode.window.showErrorMessage(String(error))),
  );
  if (picked) {
    const where = picked.compile.call_site ?? { uri: picked.compile.uri, line: picked.compile.def_line };
    await revealLocation(where.uri, where.line, vscode.ViewColumn.One);
  }
}

async function pickGuard(compile: CompileSummary): Promise<void> {
  const picked = await vscode.window.showQuickPick(guardItems(compile), {
    placeHolder: `Guards of [${compile.compile_id}] ${compile.function}: a call that breaks one recompiles`,
    ...MATCH_EVERY_LINE,
  });
  if (picked && picked.line !== null) {
    await revealLocation(compile.uri, picked.line, vscode.ViewColumn.One);
  }
}

/** The structured traces' graph breaks of the active file (all files when it has none), each once per place and
 * reason: choosing one opens its line. */
async function showGraphBreaks(services: CommandServices): Promise<void> {
  requireTrust();
  const breaks = await activeFileElseAll(
    async (scope) => (await services.server.executeCommand<GraphBreaks>(ServerCommands.listGraphBreaks, scope))?.graph_breaks,
    "Kernel Lens: no graph breaks recorded. Compile the file (its TORCH_TRACE log lists them).",
  );
  const picked = await vscode.window.showQuickPick(breaks.map(graphBreakItem), {
    placeHolder: "Graph breaks, once per place and reason: most compiles first",
    ...MATCH_EVERY_LINE,
  });
  if (picked) {
    await revealLocation(picked.graphBreak.uri, picked.graphBreak.line, vscode.ViewColumn.One);
  }
}

async function reindex(services: CommandServices): Promise<void> {
  requireTrust();
  const result = await services.server.executeCommand<ReindexResult>(ServerCommands.reindex);
  await services.profileView.refresh();
  await services.lineHeat.refresh();
  void vscode.window.showInformationMessage(`Kernel Lens: indexed ${result?.runs ?? 0} run(s).`);
}

/** Shows a command's failure to the user instead of letting it vanish into the log. */
function guarded(action: (...args: unknown[]) => Promise<void>): (...args: unknown[]) => Promise<void> {
  return async (...args: unknown[]) => {
    try {
      await action(...args);
    } catch (error) {
      void vscode.window.showErrorMessage(error instanceof Error ? error.message : String(error));
    }
  };
}

export function registerCommands(services: CommandServices): vscode.Disposable[] {
  const table: Record<string, (...args: unknown[]) => Promise<void>> = {
    [Commands.compileCurrentFile]: () => runJob(services, "compile"),
    [Commands.profileCurrentFile]: () => runJob(services, "profile"),
    [Commands.checkAccuracyOfCurrentFile]: () => runJob(services, "check-accuracy"),
    [Commands.showKernelsForFunction]: (argument?: unknown) => showKernelsForFunction(services, argument),
    [Commands.pickRun]: () => pickRun(services),
    [Commands.reindexRuns]: () => reindex(services),
    [Commands.showProfile]: async () => {
      requireTrust();
      await services.profileView.show();
    },
    [Commands.compareRuns]: async () => {
      requireTrust();
      await compareRuns(services.server, services.diffDocuments);
    },
    [Commands.pickCompile]: () => pickCompile(services),
    [Commands.showGraphBreaks]: () => showGraphBreaks(services),
    [Commands.profileInductorRun]: () => profileInductorRun(services),
    [Commands.benchmarkTritonKernel]: () => benchmarkTritonKernel(services),
    [Commands.openKernelView]: async () => {
      requireTrust();
      const editor = vscode.window.activeTextEditor;
      if (!editor || !(await services.kernelView.open(editor))) {
        throw new CommandRefused("Kernel Lens: no generated line comes from this file. Compile it first (Kernel Lens: Compile Current File).");
      }
    },
    [Commands.showTritonStage]: async () => {
      requireTrust();
      const editor = vscode.window.activeTextEditor;
      const refused = editor ? await services.kernelView.pickStage(editor) : "no editor is open";
      if (refused) {
        throw new CommandRefused(`Kernel Lens: put the cursor on a line of a Triton kernel in an output_code.py (${refused}).`);
      }
    },
    [Commands.showTritonChain]: async () => {
      requireTrust();
      const editor = vscode.window.activeTextEditor;
      const refused = editor ? await services.kernelView.openTritonChain(editor) : "no editor is open";
      if (refused) {
        throw new CommandRefused(`Kernel Lens: no Triton kernel's compiled chain from this line (${refused}).`);
      }
    },
    [Commands.restartServer]: async () => {
      requireTrust();
      await services.server.restart();
    },
  };
  return Object.entries(table).map(([id, action]) => vscode.commands.registerCommand(id, guarded(action)));
}
