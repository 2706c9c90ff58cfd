// The chat of the CopilotKit example page (examples/copilotkit), as the browser tests drive it,
// and the browser they drive it in.
import { mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const artifacts = join(dirname(fileURLToPath(import.meta.url)), "../../target/browser-artifacts");

/** Debian's Chromium with one page, whose console is kept (`logs`); `failed(name)` saves a screenshot
 * (under target/browser-artifacts/) and prints the console, for a scenario that failed. */
export async function browse() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-dev-shm-usage"],
  });
  // A context of its own, where a test may open more tabs (`page.context().newPage()`).
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  const logs = [];
  page.on("console", (message) => logs.push(`${message.type()}: ${message.text()}`));
  page.on("pageerror", (error) => logs.push(`pageerror: ${error.message}`));
  async function failed(name) {
    mkdirSync(artifacts, { recursive: true });
    const screenshot = join(artifacts, `${name}.png`);
    await page.screenshot({ path: screenshot, fullPage: true }).catch(() => {});
    console.error(`page console:\n${logs.join("\n")}`);
    console.error(`page text:\n${await page.evaluate(() => document.body.innerText).catch(() => "")}`);
    console.error(`screenshot: ${screenshot}`);
  }
  return { browser, page, logs, failed };
}

/** The chat on `page`: its input and send button, and `say`. */
export function chat(page) {
  // The chat's own input (approval cards have text areas too).
  const input = page.locator("[data-testid=copilot-chat-textarea]");
  const send = page.locator("[data-testid=copilot-send-button]");

  /** Waits for one more of `locator` than there were `before` (an earlier one may look the same). */
  const another = (locator, before) => locator.nth(before).waitFor({ timeout: 15_000 });

  /** Sends `text` once the chat can take it (its button enabled), sees it taken (the input
   * empty), and waits for one more `expect` on the page if given. */
  async function say(text, expect) {
    const before = expect ? await page.getByText(expect).count() : 0;
    await input.fill(text);
    await send.click(); // waits until the button is enabled: the chat is ready to send
    await page.waitForFunction(
      () => document.querySelector("[data-testid=copilot-chat-textarea]").value === "",
    );
    if (expect) await another(page.getByText(expect), before);
  }

  /** Waits until the page's agent is the runtime's, not a stand-in while it connects. */
  async function ready() {
    await page.locator('main[data-ready="true"]').waitFor();
    await input.waitFor();
  }

  return { input, send, another, say, ready };
}
