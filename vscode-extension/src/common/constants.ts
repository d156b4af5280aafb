/** Names shared by the whole extension: ids of commands, settings, the server module and its commands. */

export const EXTENSION_NAME = "Kernel Lens";
export const CONFIG_SECTION = "kernelLens";
export const SERVER_MODULE = "lsp_server";
export const COMPILER_MODULE = "compiler";
export const DEFAULT_PYTHON = "python3";
export const PYTHON_EXTENSION_ID = "ms-python.python";

/** Commands the user runs from the palette (ids differ from the server's: the client auto-registers those). */
export const Commands = {
  compileCurrentFile: "kernelLens.compileCurrentFile",
  profileCurrentFile: "kernelLens.profileCurrentFile",
  checkAccuracyOfCurrentFile: "kernelLens.checkAccuracyOfCurrentFile",
  showKernelsForFunction: "kernelLens.showKernelsForFunction",
  pickRun: "kernelLens.pickRun",
  reindexRuns: "kernelLens.reindexRuns",
  showProfile: "kernelLens.showProfile",
  restartServer: "kernelLens.restartServer",
  compareRuns: "kernelLens.compareRuns",
  openKernelView: "kernelLens.openKernelView",
  showTritonStage: "kernelLens.showTritonStage",
  showTritonChain: "kernelLens.showTritonChain",
  pickCompile: "kernelLens.pickCompile",
  showGraphBreaks: "kernelLens.showGraphBreaks",
  profileInductorRun: "kernelLens.profileInductorRun",
  benchmarkTritonKernel: "kernelLens.benchmarkTritonKernel",
} as const;

/** `workspace/executeCommand` commands the language server implements (see lsp_server). */
export const ServerCommands = {
  reindex: "kernelLens.reindex",
  listRuns: "kernelLens.listRuns",
  selectRun: "kernelLens.selectRun",
  kernelsAt: "kernelLens.kernelsAt",
  getProfile: "kernelLens.getProfile",
  diffRuns: "kernelLens.diffRuns",
  runJob: "kernelLens.runJob",
  linkedLines: "kernelLens.linkedLines",
  lineCosts: "kernelLens.lineCosts",
  listCompiles: "kernelLens.listCompiles",
  listGraphBreaks: "kernelLens.listGraphBreaks",
  profileInductor: "kernelLens.profileInductor",
  tritonKernelsAt: "kernelLens.tritonKernelsAt",
  benchmarkKernel: "kernelLens.benchmarkKernel",
} as const;

/** How long to wait for settings/interpreter changes to settle before restarting the server. */
export const RESTART_DEBOUNCE_MS = 500;
/** Crashes tolerated within the window before the client gives up restarting. */
export const MAX_CRASHES = 5;
export const CRASH_WINDOW_MS = 3 * 60 * 1000;
