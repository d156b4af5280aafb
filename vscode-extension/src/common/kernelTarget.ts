/** The line "Show Kernels for Function" looks up: the argument a code lens passes (`{uri, line}`, 0-based),
 * else the cursor. Pure (no `vscode` import) so tests check which arguments are accepted. */

export interface KernelTarget {
  uri: string;
  line: number;
}

/** The code lens's `{uri, line}`; undefined for anything else (a menu passes a vscode.Uri, the palette nothing). */
export function parseKernelTarget(argument: unknown): KernelTarget | undefined {
  if (argument === null || typeof argument !== "object") {
    return undefined;
  }
  const { uri, line } = argument as Record<string, unknown>;
  if (typeof uri !== "string" || uri === "" || typeof line !== "number" || !Number.isInteger(line) || line < 0) {
    return undefined;
  }
  return { uri, line };
}
