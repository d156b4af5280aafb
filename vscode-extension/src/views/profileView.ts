/** The profile webview: one panel showing a run's per-kernel table and bar chart (rendered by
 * profileHtml.ts from the server's `kernelLens.getProfile`), whose links open kernels and source lines. */

import * as crypto from "crypto";
import * as vscode from "vscode";
import { ServerCommands } from "../common/constants";
import { RunProfile } from "../common/protocol";
import { runName } from "../common/runLabel";
import { KernelLensServer } from "../common/server";
import { revealLocation } from "./editorLocation";
import { parseProfileViewMessage, renderProfileHtml } from "./profileHtml";

export class ProfileView implements vscode.Disposable {
  static readonly viewType = "kernelLens.profile";
  private panel: vscode.WebviewPanel | undefined;
  private runId: string | null = null;

  constructor(
    private readonly server: KernelLensServer,
    private readonly pickRun: () => Promise<void>,
  ) {}

  /** Opens (or reveals) the panel beside the editor and shows `runId` (null: the selected run). */
  async show(runId: string | null = null): Promise<void> {
    this.runId = runId;
    if (!this.panel) {
      this.panel = vscode.window.createWebviewPanel(
        ProfileView.viewType,
        "Kernel Lens Profile",
        { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true },
        { enableScripts: true, localResourceRoots: [] },
      );
      this.panel.onDidDispose(() => (this.panel = undefined));
      this.panel.webview.onDidReceiveMessage((message) => void this.onMessage(message));
    } else {
      this.panel.reveal(undefined, true);
    }
    await this.refresh();
  }

  /** Re-reads the profile from the server if the panel is open. */
  async refresh(): Promise<void> {
    const panel = this.panel;
    if (!panel) {
      return;
    }
    let profile: RunProfile | null = null;
    try {
      profile = await this.server.executeCommand<RunProfile | null>(ServerCommands.getProfile, { run_id: this.runId });
    } catch (error) {
      void vscode.window.showErrorMessage(`Kernel Lens: could not read the profile: ${error instanceof Error ? error.message : String(error)}`);
    }
    panel.title = profile ? `Kernel Lens Profile · ${runName(profile.run_id, profile.rank_label)}` : "Kernel Lens Profile";
    panel.webview.html = renderProfileHtml(profile, { cspSource: panel.webview.cspSource, nonce: crypto.randomBytes(16).toString("hex") });
  }

  /** A newly selected run replaces the shown one. */
  async showSelectedRun(): Promise<void> {
    this.runId = null;
    await this.refresh();
  }

  dispose(): void {
    this.panel?.dispose();
  }

  private async onMessage(raw: unknown): Promise<void> {
    const message = parseProfileViewMessage(raw);
    const actions: Record<string, () => Promise<unknown>> = {
      open: async () => message?.type === "open" && revealLocation(message.uri, message.line, vscode.ViewColumn.One),
      selectRun: () => this.pickRun(),
      refresh: () => this.refresh(),
    };
    if (message) {
      await actions[message.type]();
    }
  }
}
