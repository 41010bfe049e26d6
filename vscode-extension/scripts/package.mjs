// Packages the extension as a platform-specific .vsix with the `mlpl` and
// `mlpl-lsp` binaries of this machine in bin/.
//
// Usage: node scripts/package.mjs [--release | --debug] [--out FILE]
//   --release (default): builds the binaries with `cargo build --release` first.
//   --debug: uses target/debug binaries as they are (what `cargo test` built; the
//            end-to-end test uses this so CI compiles one profile only).
// Debug information is stripped from the copies when `strip` is available.
// Output: target/vsix/mlpl-studio-VERSION-TARGET.vsix unless --out is given.
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ext = join(dirname(fileURLToPath(import.meta.url)), "..");
const repo = resolve(ext, "..");
const args = process.argv.slice(2);
const debug = args.includes("--debug");
const outIdx = args.indexOf("--out");
const pkg = JSON.parse(readFileSync(join(ext, "package.json"), "utf8"));

function fail(msg) {
  console.error(`package: ${msg}`);
  process.exit(1);
}

const targets = { "linux-x64": "linux-x64", "linux-arm64": "linux-arm64", "darwin-x64": "darwin-x64", "darwin-arm64": "darwin-arm64", "win32-x64": "win32-x64", "win32-arm64": "win32-arm64" };
const target = targets[`${process.platform}-${process.arch}`];
if (!target) {
  fail(`no VS Code target for ${process.platform}-${process.arch}`);
}
const exe = process.platform === "win32" ? ".exe" : "";
const profile = debug ? "debug" : "release";
const targetDir = process.env.CARGO_TARGET_DIR ? resolve(process.env.CARGO_TARGET_DIR) : join(repo, "target");

if (!debug) {
  console.log("package: cargo build --release -p mlpl-runner --bin mlpl -p mlpl-lsp --bin mlpl-lsp");
  const r = spawnSync("cargo", ["build", "--release", "--locked", "-p", "mlpl-runner", "--bin", "mlpl", "-p", "mlpl-lsp", "--bin", "mlpl-lsp"], { cwd: repo, stdio: "inherit" });
  if (r.status !== 0) {
    fail("cargo build failed");
  }
}

const bin = join(ext, "bin");
rmSync(bin, { recursive: true, force: true });
mkdirSync(bin, { recursive: true });
const hasStrip = process.platform !== "win32" && spawnSync("strip", ["--version"], { stdio: "ignore" }).status === 0;
for (const name of ["mlpl", "mlpl-lsp"]) {
  const from = join(targetDir, profile, name + exe);
  if (!existsSync(from)) {
    fail(`${from} is missing: build it with \`cargo build${debug ? "" : " --release"} -p ${name === "mlpl" ? "mlpl-runner --bin mlpl" : "mlpl-lsp"}\``);
  }
  const to = join(bin, name + exe);
  if (hasStrip && process.platform === "linux") {
    execFileSync("strip", ["--strip-debug", "-o", to, from]);
  } else {
    copyFileSync(from, to);
  }
  chmodSync(to, 0o755);
}

console.log("package: bundling with esbuild");
execFileSync(process.execPath, [join(ext, "scripts", "build.mjs"), "--minify"], { cwd: ext, stdio: "inherit" });

const out = outIdx >= 0 ? resolve(args[outIdx + 1]) : join(targetDir, "vsix", `${pkg.name}-${pkg.version}-${target}.vsix`);
mkdirSync(dirname(out), { recursive: true });
const vsce = join(repo, "node_modules", "@vscode", "vsce", "vsce");
if (!existsSync(vsce)) {
  fail("@vscode/vsce is not installed: run `npm ci` at the repository root");
}
const r = spawnSync(process.execPath, [vsce, "package", "--no-dependencies", "--skip-license", "--allow-missing-repository", "--no-rewrite-relative-links", "--target", target, "--out", out], { cwd: ext, stdio: "inherit" });
if (r.status !== 0) {
  fail("vsce package failed");
}
console.log(`package: ${out}`);
