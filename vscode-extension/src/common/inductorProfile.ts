/** The palette's "Profile Inductor Run": what it asks the server's `kernelLens.profileInductor` (the active
 * file's run, else the current run) and how the answer reads to a user. Pure (no `vscode` import). */

import { JobOutcome } from "./jobs";
import { JobResult } from "./protocol";

/** `{uri}` of the active file on disk (an Inductor `output_code.py`, or a file a run compiled), else `{}`: the
 * server's current run. */
export function profileInductorRequest(activeUri: string | undefined): { uri?: string } {
  return activeUri && activeUri.startsWith("file:") ? { uri: activeUri } : {};
}

function lastLine(text: string): string {
  const lines = text.split("\n").map((line) => line.trim()).filter((line) => line.length > 0);
  return lines[lines.length - 1] ?? "";
}

/** Exit 0: profiled (the profile view opens on it); 2: the server's refusal (our own run, no Inductor run) in
 * its words; anything else: the job failed, with its last output line. */
export function profileInductorOutcome(result: JobResult | undefined): JobOutcome {
  if (result === undefined || result === null) {
    return { level: "error", text: "Kernel Lens: the language server did not answer (is it running?).", succeeded: false };
  }
  const said = lastLine(result.output_tail);
  if (result.exit_code === 0) {
    return { level: "info", text: "Kernel Lens: Inductor run profiled (its kernels by category are in the profile view).", succeeded: true };
  }
  if (result.exit_code === 2) {
    return { level: "warning", text: `Kernel Lens: ${said || "profile-inductor refused the request (usage error)."}`, succeeded: false };
  }
  const tail = said ? `: ${said}` : ".";
  return { level: "error", text: `Kernel Lens: profiling the Inductor run exited with code ${result.exit_code}${tail}`, succeeded: false };
}
