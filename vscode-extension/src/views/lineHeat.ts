/** The cost gutter: each compiled line of a visible Python file gets a heat mark by its share of the profiled
 * time (from the server's `kernelLens.lineCosts`), with what the number measures on hover. */

import * as vscode from "vscode";
import { ServerCommands } from "../common/constants";
import { LineCosts } from "../common/protocol";
import { KernelLensServer } from "../common/server";
import { HEAT_COLOURS, heatMarkUri, heatMessage, linesByHeat } from "./heat";

export class LineHeat implements vscode.Disposable {
  private readonly levels = HEAT_COLOURS.map((colour) =>
    vscode.window.createTextEditorDecorationType({
      gutterIconPath: vscode.Uri.parse(heatMarkUri(colour)),
      gutterIconSize: "contain",
      overviewRulerColor: colour,
      overviewRulerLane: vscode.OverviewRulerLane.Left,
    }),
  );
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor(private readonly server: KernelLensServer) {
    this.subscriptions.push(vscode.window.onDidChangeVisibleTextEditors(() => void this.refresh()));
  }

  /** Re-reads the costs of every visible Python file on disk and redraws their marks. */
  async refresh(): Promise<void> {
    if (!this.server.isRunning) {
      return;
    }
    const editors = vscode.window.visibleTextEditors.filter((e) => e.document.languageId === "python" && e.document.uri.scheme === "file");
    for (const editor of editors) {
      let costs: LineCosts | null = null;
      try {
        costs = await this.server.executeCommand<LineCosts | null>(ServerCommands.lineCosts, { uri: editor.document.uri.toString() });
      } catch {
        costs = null; // a server restarting: the next refresh draws them
      }
      const byLevel = costs ? linesByHeat(costs) : HEAT_COLOURS.map(() => []);
      const entries = new Map((costs?.lines ?? []).map((entry) => [entry.line, entry]));
      this.levels.forEach((decoration, level) =>
        editor.setDecorations(
          decoration,
          byLevel[level]
            .filter((line) => line < editor.document.lineCount)
            .map((line) => {
              const entry = entries.get(line);
              return { range: editor.document.lineAt(line).range, hoverMessage: entry ? new vscode.MarkdownString(heatMessage(entry)) : undefined };
            }),
        ),
      );
    }
  }

  dispose(): void {
    this.subscriptions.forEach((s) => s.dispose());
    this.levels.forEach((d) => d.dispose());
  }
}
