// Drives the VS Code workbench in Chromium through playwright-core: open files, run palette commands,
// hover a word, read a webview. Selectors are VS Code 1.100's DOM (code-server 4.100.3).
import { chromium } from "playwright-core";

export const CHROMIUM = process.env.KERNEL_LENS_CHROMIUM ?? "/usr/bin/chromium";

export async function launchBrowser(userDataDir) {
  return chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1600, height: 900 },
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

export async function waitForWorkbench(page) {
  await page.locator(".monaco-workbench").waitFor({ timeout: 120_000 });
  // The explorer shows the folder once the remote file system answers.
  await page.locator(".explorer-folders-view, .explorer-viewlet").first().waitFor({ timeout: 120_000 });
}

/** Opens the palette (F1) and types `prefix + text`: ">" lists commands, "" lists files. */
export async function quickInput(page, prefix, text) {
  const input = page.locator(".quick-input-widget input.input");
  for (let attempt = 1; ; attempt++) {
    // A pick that is still closing (its row was just clicked) swallows F1 and then hides the input
    // under our fill: wait for it to be gone first, and open the palette again if it still went away.
    await input.waitFor({ state: "hidden", timeout: 10_000 }).catch(() => page.keyboard.press("Escape"));
    await page.keyboard.press("F1");
    try {
      await input.waitFor({ state: "visible", timeout: 10_000 });
      await input.fill(`${prefix}${text}`, { timeout: 10_000 });
      return input;
    } catch (error) {
      if (attempt === 3) throw error;
    }
  }
}

/** Runs a command from the palette by its title ("Kernel Lens: Profile Current File"). */
export async function runCommand(page, title) {
  await quickInput(page, ">", title);
  const row = page.locator(".quick-input-list .monaco-list-row", { hasText: title }).first();
  await row.waitFor({ timeout: 30_000 });
  await row.click();
}

/** Where an editor's lines are: the active editor group's text editor, or an open notebook's cells (VS Code
 * draws a notebook's cell editors over the editor group, outside its element). */
export const TEXT_EDITOR = ".editor-group-container.active .monaco-editor";
export const NOTEBOOK_CELLS = ".notebook-editor .monaco-editor";

/** Opens a workspace file by name through Quick Open and waits for its editor to show `expectText`. */
export async function openFile(page, fileName, expectText, scope = TEXT_EDITOR) {
  await quickInput(page, "", fileName);
  const row = page.locator(".quick-input-list .monaco-list-row", { hasText: fileName }).first();
  await row.waitFor({ timeout: 30_000 });
  await page.keyboard.press("Enter");
  await editorLine(page, expectText, scope).waitFor({ timeout: 30_000 });
}

/** The rendered line of the active editor containing `text`. */
export function editorLine(page, text, scope = TEXT_EDITOR) {
  return page.locator(`${scope} .view-lines .view-line`, { hasText: text }).first();
}

/** The token span `word` within the line containing `lineText`. */
export function token(page, lineText, word, scope = TEXT_EDITOR) {
  return editorLine(page, lineText, scope).locator("span > span", { hasText: new RegExp(`^${word}$`) }).first();
}

/** Clicks a token by coordinates: editor overlay layers fail Playwright's hit-target check, not the editor's. */
export async function clickToken(page, lineText, word, scope = TEXT_EDITOR) {
  const target = token(page, lineText, word, scope);
  await target.waitFor({ timeout: 30_000 });
  const box = await target.boundingBox();
  await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
}

/**
 * Hovers `word` until the hover shows `expected` (the server may still be starting or indexing).
 * `abortIf` returns a reason to stop early (say, the server failed to start). Returns the hover's text.
 */
export async function hoverUntil(page, lineText, word, expected, timeoutMs, abortIf = async () => undefined, scope = TEXT_EDITOR) {
  const deadline = Date.now() + timeoutMs;
  const target = token(page, lineText, word, scope);
  // Each editor group has its own hover widget: take the one on screen.
  const hover = page.locator(".monaco-hover-content:visible").first();
  let last = "";
  while (Date.now() < deadline) {
    const reason = await abortIf();
    if (reason) {
      throw new Error(`gave up hovering ${word}: ${reason}`);
    }
    await page.mouse.move(5, 5);
    await page.keyboard.press("Escape");
    const box = await target.boundingBox();
    if (box) {
      await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2, { steps: 3 });
    }
    try {
      await hover.waitFor({ state: "visible", timeout: 5_000 });
      last = await hover.innerText();
      if (expected.some((e) => last.includes(e))) {
        return last;
      }
    } catch {
      // no hover yet
    }
    await page.waitForTimeout(2_000);
  }
  throw new Error(`hover over ${word} never showed any of ${expected.join(", ")}; last hover: ${JSON.stringify(last)}`);
}

/** The content frame of the webview panel titled `title` (VS Code nests it in two iframes). */
export function webviewFrame(page) {
  return page.frameLocator("iframe.webview.ready").last().frameLocator("iframe#active-frame");
}

/** Waits until the active editor group's active tab is `title`. */
export async function waitForActiveTab(page, title, timeout = 30_000) {
  await page.waitForFunction(
    (wanted) => document.querySelector(".editor-group-container.active .tab.active .label-name")?.textContent === wanted,
    title,
    { timeout },
  );
}

/** Clicks `link` until the active tab becomes `title`: a click that lands while the webview is re-rendering
 *  (a refresh after a server restart or a new run) is lost, as it would be for a user, who clicks again.
 *  Returns the number of clicks it took; throws after `attempts` clicks. */
export async function clickUntilActiveTab(page, link, title, attempts = 3) {
  for (let attempt = 1; ; attempt++) {
    await link.click();
    try {
      await waitForActiveTab(page, title, attempt < attempts ? 10_000 : 30_000);
      return attempt;
    } catch (error) {
      if (attempt >= attempts) {
        throw error;
      }
    }
  }
}

/** The 1-based cursor line the status bar shows for the active editor. */
export async function cursorLine(page) {
  const status = await page.locator(".statusbar-item", { hasText: /Ln \d+, Col \d+/ }).first().innerText();
  return Number(/Ln (\d+)/.exec(status)[1]);
}

/** The cursor line once `accept(line)` holds (the editor applies a link's selection a moment after its tab
 *  becomes active), or the last line seen when `timeout` ms pass without it: the caller asserts on it. */
export async function settledCursorLine(page, accept, timeout = 10_000) {
  const deadline = Date.now() + timeout;
  let line = await cursorLine(page);
  while (!accept(line) && Date.now() < deadline) {
    await page.waitForTimeout(200);
    line = await cursorLine(page);
  }
  return line;
}

export function activeTabTitle(page) {
  return page.locator(".editor-group-container.active .tab.active .label-name").first().innerText();
}
