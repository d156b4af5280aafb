/** Owns the language-server process (`<python> -m lsp_server` over stdio): starts it with the current
 * settings, restarts it on crash with a visible message and debounces restarts asked for by changes; in an
 * untrusted workspace it starts nothing (`ServerLifecycle`). */

import * as vscode from "vscode";
import {
  CloseAction,
  ErrorAction,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  RevealOutputChannelOn,
  ServerOptions,
  State,
} from "vscode-languageclient/node";
import { CONFIG_SECTION, CRASH_WINDOW_MS, EXTENSION_NAME, MAX_CRASHES, RESTART_DEBOUNCE_MS } from "./constants";
import { describeInterpreter, Interpreter, serverCommandLine } from "./interpreter";
import { CrashBudget } from "./restartPolicy";
import { ServerLifecycle } from "./serverLifecycle";
import { initializationOptions, KernelLensSettings } from "./settings";

export class ServerNotRunningError extends Error {
  constructor() {
    super("The Kernel Lens language server is not running. Run “Kernel Lens: Restart Server” and check the Kernel Lens output.");
  }
}

/** Where the server gets what it needs when (re)started. */
export interface ServerEnvironment {
  /** Whether the workspace is trusted: nothing starts before it is. */
  isTrusted(): boolean;
  interpreter(): Promise<Interpreter>;
  settings(): KernelLensSettings;
  workspaceFolder(): string | undefined;
  /** Whether the interpreter has the server; when not, the install offer is shown (`installOffer.ts`). */
  canStart(interpreter: Interpreter): Promise<boolean>;
  /** An explicit restart asks about installing again. */
  forgetAsked(): void;
}

export class KernelLensServer implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private readonly crashes = new CrashBudget(MAX_CRASHES, CRASH_WINDOW_MS);
  private readonly lifecycle: ServerLifecycle;
  private readonly runningChanged = new vscode.EventEmitter<boolean>();
  /** Fires true when a server finished initializing, false when it stopped. */
  readonly onDidChangeRunning = this.runningChanged.event;

  constructor(
    private readonly output: vscode.LogOutputChannel,
    private readonly environment: ServerEnvironment,
  ) {
    this.lifecycle = new ServerLifecycle(
      {
        isTrusted: () => environment.isTrusted(),
        launch: () => this.startNow(),
        shutdown: () => this.stopNow(),
        refused: () => output.info("Untrusted workspace: the server was not started."),
      },
      RESTART_DEBOUNCE_MS,
    );
  }

  get isRunning(): boolean {
    return this.client?.isRunning() ?? false;
  }

  start(): Promise<void> {
    return this.lifecycle.start();
  }

  stop(): Promise<void> {
    return this.lifecycle.stop();
  }

  restart(): Promise<void> {
    this.crashes.reset();
    this.environment.forgetAsked();
    return this.lifecycle.restart();
  }

  /** Restart after changes settle (several settings often change together). */
  scheduleRestart(): void {
    this.lifecycle.scheduleRestart();
  }

  /** Sends `workspace/executeCommand` straight to the server. */
  async executeCommand<T>(command: string, ...args: unknown[]): Promise<T> {
    await this.lifecycle.settled();
    if (!this.client || !this.client.isRunning()) {
      throw new ServerNotRunningError();
    }
    return (await this.client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args })) as T;
  }

  dispose(): void {
    this.lifecycle.cancelScheduled();
    void this.stop();
    this.runningChanged.dispose();
  }

  private async startNow(): Promise<void> {
    if (this.client) {
      return;
    }
    const interpreter = await this.environment.interpreter();
    if (!(await this.environment.canStart(interpreter))) {
      return; // no kernel-lens there: the install offer says so
    }
    const settings = this.environment.settings();
    const line = serverCommandLine(interpreter);
    this.output.info(`Starting the server: ${line.command} ${line.args.join(" ")}; interpreter ${describeInterpreter(interpreter)}`);
    this.output.info(`Initialization options: ${JSON.stringify(initializationOptions(settings))}`);
    // No `transport`: with one set, the client appends `--stdio`, which `python -m lsp_server` rejects.
    const serverOptions: ServerOptions = {
      command: line.command,
      args: line.args,
      options: { cwd: this.environment.workspaceFolder(), env: { ...process.env, ...settings.serverEnv, PYTHONUNBUFFERED: "1" } },
    };
    const client = new LanguageClient(CONFIG_SECTION, EXTENSION_NAME, serverOptions, this.clientOptions(settings));
    this.client = client;
    client.onDidChangeState((change) => this.runningChanged.fire(change.newState === State.Running));
    try {
      await client.start();
      this.output.info("The server is running.");
    } catch (error) {
      this.client = undefined;
      const message = error instanceof Error ? error.message : String(error);
      this.output.error(`The server failed to start: ${message}`);
      void this.showWithOutput(
        "error",
        `Kernel Lens: the language server failed to start with ${line.command} (${message}). Is kernel-lens installed in that environment? Set kernelLens.pythonPath to choose another interpreter.`,
      );
      await client.dispose().catch(() => undefined);
    }
  }

  private async stopNow(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (!client) {
      return;
    }
    try {
      await client.dispose(2000);
    } catch (error) {
      this.output.warn(`Stopping the server: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  private clientOptions(settings: KernelLensSettings): LanguageClientOptions {
    return {
      documentSelector: [
        { scheme: "file", language: "python" },
        { scheme: "file", pattern: "**/torch_compile_debug/**" },
        // Jupyter notebooks' Python cells (the server matches each to the kernel file its compile came from)
        { notebook: "*", language: "python" },
      ],
      outputChannel: this.output,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      initializationOptions: initializationOptions(settings),
      errorHandler: {
        error: (_error, _message, count) => ({ action: (count ?? 0) <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown, handled: true }),
        closed: () => {
          const verdict = this.crashes.recordCrash();
          if (verdict.restart) {
            void this.showWithOutput("warning", `Kernel Lens: the language server stopped unexpectedly; restarting it (${verdict.count}/${MAX_CRASHES}).`);
            return { action: CloseAction.Restart, handled: true };
          }
          void this.showWithOutput(
            "error",
            `Kernel Lens: the language server crashed ${verdict.count} times in ${CRASH_WINDOW_MS / 60000} minutes and was not restarted. See the output, then run “Kernel Lens: Restart Server”.`,
          );
          return { action: CloseAction.DoNotRestart, handled: true };
        },
      },
    };
  }

  private async showWithOutput(level: "warning" | "error", text: string): Promise<void> {
    const show = level === "warning" ? vscode.window.showWarningMessage : vscode.window.showErrorMessage;
    if ((await show(text, "Show Output")) === "Show Output") {
      this.output.show();
    }
  }
}
