/** Reads the `kernelLens.*` settings into one typed value and turns it into the server's initializationOptions.
 * Pure (no `vscode` import): the extension hands in its WorkspaceConfiguration, tests hand in a plain object. */

import * as os from "os";
import * as path from "path";

export interface KernelLensSettings {
  /** Interpreter set by the user ("" when unset). Already expanded and absolute when it looks like a path. */
  pythonPath: string;
  /** Absolute folders searched for `torch_compile_debug/` runs. */
  debugRoots: string[];
  /** Absolute folders holding structured traces. */
  traceDirs: string[];
  /** Absolute torch.profiler traces (`*.pt.trace.json` files, or folders holding them). */
  profilerTraces: string[];
  /** Extra environment for the server and jobs. */
  serverEnv: Record<string, string>;
  /** Severity of each structured-trace finding kind, keyed by its initializationOptions name. */
  severities: Record<SeveritySetting, Severity>;
}

/** Diagnostic severities the server accepts (lsp_server/settings.py SEVERITIES). */
export const SEVERITIES = ["error", "warning", "information", "hint"] as const;
export type Severity = (typeof SEVERITIES)[number];

/** `kernelLens.<name>` severity settings and their defaults (the server's defaults, lsp_server/settings.py). */
export const SEVERITY_DEFAULTS = {
  graphBreakSeverity: "warning",
  recompileSeverity: "information",
  compileFailureSeverity: "error",
  rankDivergenceSeverity: "warning",
} as const satisfies Record<string, Severity>;
export type SeveritySetting = keyof typeof SEVERITY_DEFAULTS;

/** What the server receives as `initializationOptions` (its contract: see lsp_server). */
export interface InitializationOptions extends Record<SeveritySetting, Severity> {
  debugRoots: string[];
  traceDirs: string[];
  profilerTraces: string[];
}

/** The part of vscode.WorkspaceConfiguration we use. */
export interface SettingsSource {
  get<T>(key: string): T | undefined;
}

/** Settings whose change needs a server restart (the rest are read when used). */
export const RESTART_SETTINGS = ["pythonPath", "debugRoots", "traceDirs", "profilerTraces", "serverEnv", ...(Object.keys(SEVERITY_DEFAULTS) as SeveritySetting[])];

/** Expands `${workspaceFolder}`, `${userHome}`, `${env:NAME}` and `~`, then anchors relative paths at the folder. */
export function resolvePath(value: string, workspaceFolder: string | undefined): string {
  let expanded = value
    .replace(/\$\{workspaceFolder\}/g, workspaceFolder ?? "")
    .replace(/\$\{userHome\}/g, os.homedir())
    .replace(/\$\{env:([^}]+)\}/g, (_match, name: string) => process.env[name] ?? "");
  if (expanded === "~" || expanded.startsWith("~/")) {
    expanded = path.join(os.homedir(), expanded.slice(1));
  }
  if (!path.isAbsolute(expanded) && workspaceFolder) {
    return path.resolve(workspaceFolder, expanded);
  }
  return expanded;
}

/** A bare command name such as `python3` stays as is (found on PATH); anything with a slash is a path. */
function resolveInterpreterSetting(value: string, workspaceFolder: string | undefined): string {
  const trimmed = value.trim();
  if (trimmed === "" || !/[\\/$~]/.test(trimmed)) {
    return trimmed;
  }
  return resolvePath(trimmed, workspaceFolder);
}

function stringList(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === "string" && v.trim() !== "") : [];
}

function stringRecord(value: unknown): Record<string, string> {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return {};
  }
  return Object.fromEntries(Object.entries(value).filter((entry): entry is [string, string] => typeof entry[1] === "string"));
}

function severity(value: unknown, fallback: Severity): Severity {
  return SEVERITIES.find((s) => s === value) ?? fallback;
}

function readSeverities(source: SettingsSource): Record<SeveritySetting, Severity> {
  const entries = (Object.entries(SEVERITY_DEFAULTS) as [SeveritySetting, Severity][]).map(
    ([key, fallback]) => [key, severity(source.get(key), fallback)] as const,
  );
  return Object.fromEntries(entries) as Record<SeveritySetting, Severity>;
}

/**
 * @param workspaceFolder the folder relative paths are anchored at (the first workspace folder)
 * @param allFolders every workspace folder: the default debug roots
 */
export function readSettings(source: SettingsSource, workspaceFolder: string | undefined, allFolders: string[]): KernelLensSettings {
  const roots = stringList(source.get("debugRoots")).map((p) => resolvePath(p, workspaceFolder));
  return {
    pythonPath: resolveInterpreterSetting(source.get<string>("pythonPath") ?? "", workspaceFolder),
    debugRoots: roots.length > 0 ? roots : [...allFolders],
    traceDirs: stringList(source.get("traceDirs")).map((p) => resolvePath(p, workspaceFolder)),
    profilerTraces: stringList(source.get("profilerTraces")).map((p) => resolvePath(p, workspaceFolder)),
    serverEnv: stringRecord(source.get("serverEnv")),
    severities: readSeverities(source),
  };
}

export function initializationOptions(settings: KernelLensSettings): InitializationOptions {
  return {
    debugRoots: settings.debugRoots,
    traceDirs: settings.traceDirs,
    profilerTraces: settings.profilerTraces,
    ...settings.severities,
  };
}
