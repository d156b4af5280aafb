/** When to restart the language server: crashes are restarted until too many happen within a window,
 * and restarts asked for by setting changes are debounced into one. */

export interface CrashVerdict {
  restart: boolean;
  /** Crashes counted within the window, this one included. */
  count: number;
}

export class CrashBudget {
  private crashes: number[] = [];

  constructor(
    private readonly maxCrashes: number,
    private readonly windowMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  recordCrash(): CrashVerdict {
    const t = this.now();
    this.crashes = this.crashes.filter((c) => t - c < this.windowMs);
    this.crashes.push(t);
    return { restart: this.crashes.length <= this.maxCrashes, count: this.crashes.length };
  }

  reset(): void {
    this.crashes = [];
  }
}

/** Runs `action` once, `delayMs` after the last `schedule()` call. */
export class Debouncer {
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly delayMs: number,
    private readonly action: () => void,
  ) {}

  schedule(): void {
    this.cancel();
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.action();
    }, this.delayMs);
  }

  get pending(): boolean {
    return this.timer !== undefined;
  }

  cancel(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }
}
