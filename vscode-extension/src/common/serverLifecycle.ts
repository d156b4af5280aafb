/** The order and the conditions of the language server's starts and stops: one transition at a time, in
 * the order asked, restarts asked for by changes debounced into one, and no start in an untrusted workspace. */

import { Debouncer } from "./restartPolicy";

/** What the lifecycle drives: the real process in `server.ts`, a recorder in the unit tests. */
export interface ServerProcessHooks {
  /** Whether the user trusts the workspace; starting the server runs the interpreter the workspace chooses. */
  isTrusted(): boolean;
  /** Starts the server unless one is running. */
  launch(): Promise<void>;
  /** Stops the running server, if any. */
  shutdown(): Promise<void>;
  /** A start was asked for in an untrusted workspace and not made. */
  refused(): void;
}

export class ServerLifecycle {
  private transition: Promise<void> = Promise.resolve();
  private readonly debouncedRestart: Debouncer;

  constructor(
    private readonly hooks: ServerProcessHooks,
    restartDebounceMs: number,
  ) {
    this.debouncedRestart = new Debouncer(restartDebounceMs, () => void this.restart());
  }

  start(): Promise<void> {
    return this.serialise(() => this.startNow());
  }

  stop(): Promise<void> {
    return this.serialise(() => this.hooks.shutdown());
  }

  restart(): Promise<void> {
    this.debouncedRestart.cancel();
    return this.serialise(async () => {
      await this.hooks.shutdown();
      await this.startNow();
    });
  }

  /** Restart after changes settle (several settings often change together). */
  scheduleRestart(): void {
    this.debouncedRestart.schedule();
  }

  /** Resolves when the transitions asked for so far are done. */
  settled(): Promise<void> {
    return this.transition;
  }

  cancelScheduled(): void {
    this.debouncedRestart.cancel();
  }

  private serialise(step: () => Promise<void>): Promise<void> {
    this.transition = this.transition.then(step, step);
    return this.transition;
  }

  // Every start (the first, a restart, a debounced one) passes here: the only place a process begins.
  private async startNow(): Promise<void> {
    if (!this.hooks.isTrusted()) {
      this.hooks.refused();
      return;
    }
    await this.hooks.launch();
  }
}
