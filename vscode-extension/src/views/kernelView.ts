/** The kernel view: the graph's output_code.py beside the user's file, the prelude folded, each source line
 * and the generated lines it became in one colour band; moving the cursor on either side highlights and
 * reveals the linked lines on the other (answers come from the server's `kernelLens.linkedLines`). Opened on a
 * Triton kernel's line, it also shows the kernel's compiled stage beside them (tritonChainView.ts). */

import * as vscode from "vscode";
import { ServerCommands } from "../common/constants";
import { LinkedLines } from "../common/protocol";
import { TritonKernelsAtResult } from "../common/protocolGpu";
import { KernelLensServer } from "../common/server";
import { BAND_COLOURS, lineLabel, LinkIndex, Side } from "./linkedBands";
import { chainStarts, startItem } from "./tritonChain";
import { TritonChainView } from "./tritonChainView";

const ACTIVE_BORDER = "editorLink.activeForeground";

export class KernelView implements vscode.Disposable {
  private readonly bands = BAND_COLOURS.map((colour) =>
    vscode.window.createTextEditorDecorationType({ backgroundColor: colour, isWholeLine: true, overviewRulerColor: colour }),
  );
  private readonly active = vscode.window.createTextEditorDecorationType({
    isWholeLine: true,
    borderWidth: "1px 0 1px 0",
    borderStyle: "solid",
    borderColor: new vscode.ThemeColor(ACTIVE_BORDER),
    fontWeight: "bold",
  });
  private readonly label = vscode.window.createTextEditorDecorationType({
    after: { margin: "0 0 0 2em", color: new vscode.ThemeColor("editorCodeLens.foreground") },
  });
  private index: LinkIndex | undefined;
  private readonly chain: TritonChainView;
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor(private readonly server: KernelLensServer) {
    this.chain = new TritonChainView(server);
    this.subscriptions.push(
      this.chain,
      vscode.window.onDidChangeTextEditorSelection((event) => this.follow(event.textEditor)),
      vscode.window.onDidChangeVisibleTextEditors(() => this.paint()),
    );
  }

  /** Opens the kernel view of `editor`'s file (a user file or an output_code.py); on a Triton kernel's line of an
   *  output_code.py, its compiled stage too (in the next column). */
  async open(editor: vscode.TextEditor): Promise<boolean> {
    const linked = await this.server.executeCommand<LinkedLines | null>(ServerCommands.linkedLines, { uri: editor.document.uri.toString() });
    const paired = !!linked && linked.links.length > 0 && (await this.openPair(editor, linked));
    const chained = await this.chain.open(editor, paired ? vscode.ViewColumn.Three : besideColumn(editor));
    return paired || chained;
  }

  /** The compiled chain of a Triton kernel the cursor's line leads to (a user's line: the kernel computing it,
   *  picked when several do; a kernel's own file or output_code.py: that kernel): its output_code.py at the Triton
   *  line beside, and its stage in the next column. Returns why it cannot (undefined: shown, or the pick cancelled). */
  async openTritonChain(editor: vscode.TextEditor): Promise<string | undefined> {
    const answer = await this.server.executeCommand<TritonKernelsAtResult | null>(ServerCommands.tritonKernelsAt, {
      uri: editor.document.uri.toString(),
      line: editor.selection.active.line,
    });
    const starts = chainStarts(answer);
    if (typeof starts === "string") {
      return starts;
    }
    const start = starts.length === 1 ? starts[0] : (await vscode.window.showQuickPick(
      starts.map((s) => ({ ...startItem(s), start: s })),
      { placeHolder: `${starts.length} Triton kernels compute this line: which one's compiled chain?` },
    ))?.start;
    if (!start) {
      return undefined;
    }
    const here = editor.document.uri.toString() === start.uri;
    const generated = await vscode.window.showTextDocument(here ? editor.document : await vscode.workspace.openTextDocument(vscode.Uri.parse(start.uri)), {
      viewColumn: here ? editor.viewColumn : besideColumn(editor),
      preview: false,
      selection: new vscode.Range(start.line, 0, start.line, 0),
    });
    generated.revealRange(new vscode.Range(start.line, 0, start.line, 0), vscode.TextEditorRevealType.InCenter);
    const stageColumn = generated.viewColumn === vscode.ViewColumn.One ? vscode.ViewColumn.Two : vscode.ViewColumn.Three;
    return (await this.chain.open(generated, stageColumn)) ? undefined : `${start.kernel}: no compiled stage kept beside its run`;
  }

  /** Shows the stage the user picks of the Triton kernel under the cursor; a message when there is none. */
  async pickStage(editor: vscode.TextEditor): Promise<string | undefined> {
    const beside = vscode.window.visibleTextEditors.length > 2 ? vscode.ViewColumn.Three : besideColumn(editor);
    return this.chain.pickStage(editor, beside);
  }

  private async openPair(editor: vscode.TextEditor, linked: LinkedLines): Promise<boolean> {
    this.index = new LinkIndex(linked);
    const fromSource = editor.document.uri.toString() === linked.source_uri;
    const other = vscode.Uri.parse(fromSource ? linked.generated_uri : linked.source_uri);
    const column = besideColumn(editor);
    const shown = await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(other), { viewColumn: column, preview: false });
    const generatedEditor = fromSource ? shown : editor;
    if (linked.prelude) {
      const shownGenerated = await vscode.window.showTextDocument(generatedEditor.document, { viewColumn: generatedEditor.viewColumn, preserveFocus: false });
      await foldPrelude(shownGenerated, linked.prelude.start);
    }
    await vscode.window.showTextDocument(editor.document, { viewColumn: editor.viewColumn, preserveFocus: false });
    this.paint();
    this.follow(editor);
    return true;
  }

  private sideOf(editor: vscode.TextEditor): Side | undefined {
    const uri = editor.document.uri.toString();
    if (!this.index) {
      return undefined;
    }
    return uri === this.index.linked.source_uri ? "source" : uri === this.index.linked.generated_uri ? "generated" : undefined;
  }

  private editorsOf(side: Side): vscode.TextEditor[] {
    return vscode.window.visibleTextEditors.filter((editor) => this.sideOf(editor) === side);
  }

  /** Every band on both sides. */
  private paint(): void {
    if (!this.index) {
      return;
    }
    for (const side of ["source", "generated"] as Side[]) {
      const groups = this.index.linesByColour(side);
      for (const editor of this.editorsOf(side)) {
        this.bands.forEach((decoration, colour) =>
          editor.setDecorations(decoration, groups[colour].filter((line) => line < editor.document.lineCount).map((line) => editor.document.lineAt(line).range)),
        );
      }
    }
  }

  /** The cursor moved in `editor`: outline its line's band on both sides and reveal the other side's lines. */
  private follow(editor: vscode.TextEditor): void {
    const side = this.sideOf(editor);
    if (!side || !this.index) {
      return;
    }
    const line = editor.selection.active.line;
    const target = this.index.targets(side, line);
    const otherSide: Side = side === "source" ? "generated" : "source";
    const others = this.editorsOf(otherSide);
    editor.setDecorations(this.active, target ? [editor.document.lineAt(line).range] : []);
    editor.setDecorations(this.label, []);
    const hereUri = editor.document.uri.toString();
    for (const other of others) {
      const lines = (target?.lines ?? []).filter((n) => n < other.document.lineCount);
      other.setDecorations(this.active, lines.map((n) => other.document.lineAt(n).range));
      other.setDecorations(
        this.label,
        lines.slice(0, 1).map((n) => ({
          range: other.document.lineAt(n).range,
          renderOptions: { after: { contentText: `${side === "source" ? "◀" : "▶"} ${lineLabel(hereUri, line)}` } },
        })),
      );
      if (lines.length > 0) {
        const range = new vscode.Range(lines[0], 0, lines[lines.length - 1], 0);
        other.revealRange(range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
      }
    }
  }

  dispose(): void {
    this.subscriptions.forEach((s) => s.dispose());
    [...this.bands, this.active, this.label].forEach((d) => d.dispose());
  }
}

function besideColumn(editor: vscode.TextEditor): vscode.ViewColumn {
  return editor.viewColumn === vscode.ViewColumn.One ? vscode.ViewColumn.Two : vscode.ViewColumn.One;
}

/** Folds the prelude starting at 0-based `start`: a document just opened may not have its folding ranges yet (the
 *  fold command then does nothing), so the fold is asked again until the line after `start` is hidden (2 s at most). */
async function foldPrelude(editor: vscode.TextEditor, start: number): Promise<void> {
  const inside = new vscode.Position(start + 1, 0);
  for (let attempt = 0; attempt < 20; attempt++) {
    await vscode.commands.executeCommand("editor.fold", { selectionLines: [start], levels: 1 });
    if (!editor.visibleRanges.some((range) => range.contains(inside))) {
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
