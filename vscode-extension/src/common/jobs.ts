/** What each compiler job is called and how its exit code reads to a user (a table, one row per job kind).
 * Exit codes follow the `kernel-lens` CLI: 0 ok, 1 the program failed or mismatched, 2 usage error. */

import { JobKind } from "./protocol";

export type MessageLevel = "info" | "warning" | "error";

export interface JobSpec {
  kind: JobKind;
  /** Shown in the progress notification and the terminal's title: "Profiling foo1.py". */
  verb: string;
  success: string;
  failure: string;
  /** Whether the profile view opens when the job succeeds. */
  opensProfile: boolean;
}

export const JOB_SPECS: Record<JobKind, JobSpec> = {
  compile: { kind: "compile", verb: "Compiling", success: "compiled", failure: "failed to compile or run", opensProfile: false },
  profile: { kind: "profile", verb: "Profiling", success: "profiled", failure: "failed to profile", opensProfile: true },
  "check-accuracy": {
    kind: "check-accuracy",
    verb: "Checking accuracy of",
    success: "compiled output matches eager",
    failure: "compiled output differs from eager (see the diagnostics)",
    opensProfile: false,
  },
};

export interface JobOutcome {
  level: MessageLevel;
  text: string;
  succeeded: boolean;
}

/** `exitCode` undefined means the task was cancelled or its process could not start. */
export function jobOutcome(kind: JobKind, fileName: string, exitCode: number | undefined): JobOutcome {
  const spec = JOB_SPECS[kind];
  if (exitCode === undefined) {
    return { level: "warning", text: `Kernel Lens: ${spec.verb.toLowerCase()} ${fileName} was cancelled.`, succeeded: false };
  }
  const byCode: Record<number, JobOutcome> = {
    0: { level: "info", text: `Kernel Lens: ${fileName} ${spec.success}.`, succeeded: true },
    1: { level: "error", text: `Kernel Lens: ${fileName} ${spec.failure}.`, succeeded: false },
    2: { level: "error", text: `Kernel Lens: the compiler rejected the command line for ${fileName} (usage error).`, succeeded: false },
  };
  return (
    byCode[exitCode] ?? {
      level: "error",
      text: `Kernel Lens: ${spec.verb.toLowerCase()} ${fileName} exited with code ${exitCode}.`,
      succeeded: false,
    }
  );
}
