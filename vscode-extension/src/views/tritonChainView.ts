/** The kernel view's Triton part (issue 47): a Triton kernel's compiled stage (TTIR, TTGIR, LLIR, PTX or SASS, kept
 * beside the run) opened beside its Triton source in output_code.py, linked line by line both ways through the
 * server's `kernelLens.tritonChain` (each cursor move asks it), with the kernel's time on its `def` line and, on
 * a linked line, the user line it came from and that line's cost in this kernel (`kernelLens.getProfile`,
 * `kernelLens.lineCosts`). Labels and choices come from tritonChain.ts. */

import * as vscode from "vscode";
import { ServerCommands } from "../common/constants";
import { LineCosts, RunProfile } from "../common/protocol";
import { TritonChain, TritonChainResult, TritonLaunch } from "../common/protocolGpu";
import { KernelLensServer } from "../common/server";
import {
  chainError, firstStage, isChain, kernelCost, kernelLabel, launchHover, launchLabel, lineCostMs, STAGE_TITLES, stageLineLabel,
  stagesOf, tritonLineLabel,
} from "./tritonChain";

export const CHAIN_COMMAND = "kernelLens.tritonChain";
const ACTIVE_BORDER = "editorLink.activeForeground";

interface Shown {
  launch: TritonLaunch;
  kernel: string;
  graphId: string;
  tritonUri: string;
  stage: string;
  stageUri: string;
  cost?: { ms: number; percent: number };
}

export class TritonChainView implements vscode.Disposable {
  private readonly active = vscode.window.createTextEditorDecorationType({
    isWholeLine: true,
    backgroundColor: "rgba(132, 182, 244, 0.22)",
    borderWidth: "1px 0 1px 0",
    borderStyle: "solid",
    borderColor: new vscode.ThemeColor(ACTIVE_BORDER),
  });
  private readonly label = vscode.window.createTextEditorDecorationType({
    after: { margin: "0 0 0 2em", color: new vscode.ThemeColor("editorCodeLens.foreground") },
  });
  private readonly header = vscode.window.createTextEditorDecorationType({
    after: { margin: "0 0 0 2em", color: new vscode.ThemeColor("editorCodeLens.foreground") },
  });
  private shown: Shown | undefined;
  private costs = new Map<string, LineCosts | undefined>();
  private asked = 0;
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor(private readonly server: KernelLensServer) {
    this.subscriptions.push(
      vscode.window.onDidChangeTextEditorSelection((event) => void this.follow(event.textEditor)),
      vscode.window.onDidChangeVisibleTextEditors(() => this.paintHeader()),
    );
  }

  private async chainAt(uri: string, line: number): Promise<TritonChainResult | null> {
    return this.server.executeCommand<TritonChainResult | null>(CHAIN_COMMAND, { uri, line });
  }

  /** The chain of the Triton kernel under `editor`'s cursor (an output_code.py), or why there is none. */
  async chainUnderCursor(editor: vscode.TextEditor): Promise<TritonChain | string> {
    const answer = await this.chainAt(editor.document.uri.toString(), editor.selection.active.line);
    return isChain(answer) ? answer : chainError(answer) ?? "no answer from the language server";
  }

  /** Opens `stage` (default: the first of FIRST_STAGES the entry has) of the kernel under the cursor in `column`.
   *  False when the cursor is on no Triton kernel with a kept cache entry. */
  async open(editor: vscode.TextEditor, column: vscode.ViewColumn, stage?: string): Promise<boolean> {
    const chain = await this.chainUnderCursor(editor);
    if (typeof chain === "string") {
      return false;
    }
    const chosen = stage ?? firstStage(chain);
    const stageUri = chosen ? chain.stages[chosen]?.uri : undefined;
    if (!chosen || !stageUri) {
      return false;
    }
    const profile = await this.server.executeCommand<RunProfile | null>(ServerCommands.getProfile, { run_id: chain.run_id });
    this.shown = { launch: chain.launch, kernel: chain.kernel, graphId: chain.graph_id, tritonUri: chain.triton.uri, stage: chosen, stageUri, cost: kernelCost(profile, chain) };
    this.costs.clear();
    await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(vscode.Uri.parse(stageUri)), {
      viewColumn: column,
      preview: false,
      preserveFocus: true,
    });
    this.paintHeader();
    await this.follow(editor);
    return true;
  }

  /** Lets the user choose which stage of the kernel under the cursor to show. */
  async pickStage(editor: vscode.TextEditor, column: vscode.ViewColumn): Promise<string | undefined> {
    const chain = await this.chainUnderCursor(editor);
    if (typeof chain === "string") {
      return chain;
    }
    const items = stagesOf(chain).map((stage) => ({ label: STAGE_TITLES[stage], description: chain.stages[stage].uri.split("/").pop(), stage }));
    const picked = await vscode.window.showQuickPick(items, { placeHolder: `Compiled stage of ${chain.kernel} to show beside it` });
    if (picked) {
      await this.open(editor, column, picked.stage);
    }
    return undefined;
  }

  private editorsOf(uri: string): vscode.TextEditor[] {
    return vscode.window.visibleTextEditors.filter((e) => e.document.uri.toString() === uri);
  }

  /** The kernel's time on its `def` line in output_code.py, its launched config and autotuning on its
   *  `@triton_heuristics` line. */
  private paintHeader(): void {
    if (!this.shown) {
      return;
    }
    const shown = this.shown;
    for (const editor of this.editorsOf(shown.tritonUri)) {
      const text = editor.document.getText();
      const at = text.indexOf(`def ${shown.kernel}(`);
      const line = at < 0 ? undefined : editor.document.positionAt(at).line;
      const opening = text.indexOf(`${shown.kernel} = async_compile.triton(`);
      const heuristics = opening < 0 ? -1 : text.indexOf("@triton_heuristics.", opening);
      const launchLine = heuristics < 0 || heuristics > at ? undefined : editor.document.positionAt(heuristics).line;
      editor.setDecorations(this.header, [
        ...(line === undefined ? [] : [{
          range: editor.document.lineAt(line).range,
          renderOptions: { after: { contentText: kernelLabel(shown.cost, shown.stage) } },
        }]),
        ...(launchLine === undefined ? [] : [{
          range: editor.document.lineAt(launchLine).range,
          hoverMessage: new vscode.MarkdownString(launchHover(shown.launch)),
          renderOptions: { after: { contentText: launchLabel(shown.launch) } },
        }]),
      ]);
    }
  }

  private async lineCosts(chain: TritonChain): Promise<LineCosts | undefined> {
    const uri = chain.source?.uri;
    if (!uri) {
      return undefined;
    }
    if (!this.costs.has(uri)) {
      this.costs.set(uri, (await this.server.executeCommand<LineCosts | null>(ServerCommands.lineCosts, { uri })) ?? undefined);
    }
    return this.costs.get(uri);
  }

  private mark(editors: vscode.TextEditor[], lines: number[], labelText: string | undefined, reveal: boolean): void {
    for (const editor of editors) {
      const inside = lines.filter((n) => n < editor.document.lineCount);
      editor.setDecorations(this.active, inside.map((n) => editor.document.lineAt(n).range));
      editor.setDecorations(this.label, labelText === undefined ? [] : inside.slice(0, 1).map((n) => ({
        range: editor.document.lineAt(n).range,
        renderOptions: { after: { contentText: labelText } },
      })));
      if (reveal && inside.length > 0) {
        editor.revealRange(new vscode.Range(inside[0], 0, inside[inside.length - 1], 0), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
      }
    }
  }

  /** The cursor moved: a stage line outlines its Triton line (and the stage's other lines from it); a Triton
   *  line of the kernel outlines its lines in the stage. */
  private async follow(editor: vscode.TextEditor): Promise<void> {
    const shown = this.shown;
    const uri = editor.document.uri.toString();
    if (!shown || (uri !== shown.stageUri && uri !== shown.tritonUri)) {
      return;
    }
    const line = editor.selection.active.line;
    const ticket = ++this.asked;
    const answer = await this.chainAt(uri, line);
    if (ticket !== this.asked || this.shown !== shown) {
      return; // the cursor moved on meanwhile
    }
    const stageEditors = this.editorsOf(shown.stageUri);
    const tritonEditors = this.editorsOf(shown.tritonUri);
    if (!isChain(answer) || answer.kernel !== shown.kernel) {
      this.mark([...stageEditors, ...tritonEditors], [], undefined, false);
      return;
    }
    const cost = lineCostMs(await this.lineCosts(answer), answer);
    if (ticket !== this.asked) {
      return;
    }
    const stageLines = answer.stages[shown.stage]?.lines ?? [];
    if (uri === shown.stageUri) {
      this.mark(tritonEditors, [answer.triton.line], tritonLineLabel(answer, line, cost), true);
      this.mark(stageEditors, stageLines.includes(line) ? stageLines : [line, ...stageLines], undefined, false);
    } else {
      this.mark(tritonEditors, [answer.triton.line], undefined, false);
      this.mark(stageEditors, stageLines, stageLineLabel(answer, cost), true);
    }
  }

  dispose(): void {
    this.subscriptions.forEach((s) => s.dispose());
    [this.active, this.label, this.header].forEach((d) => d.dispose());
  }
}
