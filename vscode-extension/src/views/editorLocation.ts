/** Opens a file URI with the cursor on a 0-based line, centred, in a chosen editor column. */

import * as vscode from "vscode";

export async function revealLocation(uri: string, line: number, column: vscode.ViewColumn): Promise<vscode.TextEditor> {
  const document = await vscode.workspace.openTextDocument(vscode.Uri.parse(uri));
  const target = Math.max(0, Math.min(line, document.lineCount - 1));
  const position = new vscode.Position(target, document.lineAt(target).firstNonWhitespaceCharacterIndex);
  const editor = await vscode.window.showTextDocument(document, {
    viewColumn: column,
    preserveFocus: false,
    preview: true,
    selection: new vscode.Range(position, position),
  });
  editor.revealRange(new vscode.Range(position, position), vscode.TextEditorRevealType.InCenter);
  return editor;
}
