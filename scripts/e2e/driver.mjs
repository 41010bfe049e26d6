// Drives the end-to-end test: opens code-server's workbench in headless Chromium
// (playwright-core) with the test payload, prints the extension host's console,
// takes the screenshots the test asks for (MLPL_E2E_SCREENSHOT lines), clicks
// what it asks to click (MLPL_E2E_CLICK NAME SELECTOR lines: a real mouse click
// in whichever frame holds the element, a webview's included; SELECTOR has
// no spaces), and exits with
// the test's exit code.
// Each URL is one phase, loaded in the same page one after the other (a reload:
// the browser's storage, and so the workspace state, is kept).
// Usage: node driver.mjs SHOTS_DIR TIMEOUT_S URL...   (PLAYWRIGHT_CORE: module path)
import { createRequire } from "node:module";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

const [shots, timeoutS, ...urls] = process.argv.slice(2);
const require = createRequire(import.meta.url);
const { chromium } = require(process.env.PLAYWRIGHT_CORE);

/**
 * Clicks the first element matching `selector` in any frame of the page (a
 * webview's content is two iframes deep), waiting up to 10 s for it; returns
 * why not, or null once clicked.
 */
async function clickInAnyFrame(page, selector) {
  const end = Date.now() + 10000;
  let last = `no element ${selector} in any frame`;
  while (Date.now() < end) {
    for (const frame of page.frames()) {
      const el = await frame.$(selector).catch(() => null);
      if (!el) {
        continue;
      }
      try {
        await el.click({ timeout: 5000 });
        return null;
      } catch (e) {
        last = `${selector}: ${e.message.split("\n")[0]}`;
      }
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return last;
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
});
let code = 1;
try {
  const context = await browser.newContext({ viewport: { width: 1600, height: 900 }, deviceScaleFactor: 1 });
  const page = await context.newPage();
  let finish = () => undefined;
  await page.exposeFunction("codeAutomationLog", async (type, args) => {
    const text = (Array.isArray(args) ? args : [args]).map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" ");
    const m = /MLPL_E2E_SCREENSHOT (\w+)/.exec(text);
    if (m) {
      await page.screenshot({ path: join(shots, `${m[1]}.png`) });
      writeFileSync(join(shots, `${m[1]}.done`), "");
      console.log(`screenshot: ${join(shots, `${m[1]}.png`)}`);
      return;
    }
    const click = /MLPL_E2E_CLICK (\w+) (\S+)/.exec(text);
    if (click) {
      const [, name, selector] = click;
      const why = await clickInAnyFrame(page, selector);
      writeFileSync(join(shots, `${name}.${why ? "failed" : "done"}`), why ?? "");
      console.log(`click ${name}: ${why ?? `clicked ${selector}`}`);
      return;
    }
    if (/\[e2e\]|Error|error|fail/i.test(text)) {
      console.log(`${type}: ${text}`);
    }
  });
  await page.exposeFunction("codeAutomationExit", (c) => finish(c));
  for (const [i, url] of urls.entries()) {
    const exited = new Promise((r) => (finish = r));
    await page.goto(url);
    let timer;
    const timeout = new Promise((r) => (timer = setTimeout(() => r("timeout"), Number(timeoutS) * 1000)));
    const result = await Promise.race([exited, timeout]);
    clearTimeout(timer);
    if (result === "timeout") {
      console.log(`FAIL: phase ${i + 1} did not finish within ${timeoutS} s`);
      await page.screenshot({ path: join(shots, "timeout.png") }).catch(() => undefined);
      code = 1;
      break;
    }
    code = Number(result);
    if (code !== 0) {
      console.log(`FAIL: phase ${i + 1} exited with ${code}`);
      await page.screenshot({ path: join(shots, "failure.png") }).catch(() => undefined);
      break;
    }
  }
} finally {
  await browser.close();
}
process.exit(code);
