// Drives the end-to-end test: opens code-server's workbench in headless Chromium
// (playwright-core) with the test payload, prints the extension host's console,
// takes the screenshots the test asks for, and exits with the test's exit code.
// Usage: node driver.mjs URL SHOTS_DIR TIMEOUT_S   (PLAYWRIGHT_CORE: module path)
import { createRequire } from "node:module";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

const [url, shots, timeoutS = "300"] = process.argv.slice(2);
const require = createRequire(import.meta.url);
const { chromium } = require(process.env.PLAYWRIGHT_CORE);

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
});
let code = 1;
try {
  const context = await browser.newContext({ viewport: { width: 1600, height: 900 }, deviceScaleFactor: 1 });
  const page = await context.newPage();
  let finish;
  const exited = new Promise((r) => (finish = r));
  await page.exposeFunction("codeAutomationLog", async (type, args) => {
    const text = (Array.isArray(args) ? args : [args]).map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" ");
    const m = /MLPL_E2E_SCREENSHOT (\w+)/.exec(text);
    if (m) {
      await page.screenshot({ path: join(shots, `${m[1]}.png`) });
      writeFileSync(join(shots, `${m[1]}.done`), "");
      console.log(`screenshot: ${join(shots, `${m[1]}.png`)}`);
      return;
    }
    if (/\[e2e\]|Error|error|fail/i.test(text)) {
      console.log(`${type}: ${text}`);
    }
  });
  await page.exposeFunction("codeAutomationExit", (c) => finish(c));
  await page.goto(url);
  const timer = new Promise((r) => setTimeout(() => r("timeout"), Number(timeoutS) * 1000));
  const result = await Promise.race([exited, timer]);
  if (result === "timeout") {
    console.log(`FAIL: the test did not finish within ${timeoutS} s`);
    await page.screenshot({ path: join(shots, "timeout.png") }).catch(() => undefined);
  } else {
    code = Number(result);
    if (code !== 0) {
      await page.screenshot({ path: join(shots, "failure.png") }).catch(() => undefined);
    }
  }
} finally {
  await browser.close();
}
process.exit(code);
