/**
 * Finding the `mlpl` and `mlpl-lsp` executables: the path in the setting, else the
 * binary shipped in the extension's `bin/` folder, else the name on PATH.
 */

import { existsSync } from "node:fs";
import { join } from "node:path";

/** The executable to run for `name` (`mlpl` or `mlpl-lsp`). */
export function resolveBinary(extensionPath: string, name: "mlpl" | "mlpl-lsp", configured: string): string {
  if (configured.trim()) {
    return configured.trim();
  }
  const exe = process.platform === "win32" ? `${name}.exe` : name;
  const bundled = join(extensionPath, "bin", exe);
  return existsSync(bundled) ? bundled : exe;
}
