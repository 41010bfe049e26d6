/**
 * The settings the language server reads (initialization options and
 * `workspace/didChangeConfiguration`, see lsp/src/server.rs `Config::update`),
 * built from the extension's `mlpl.*` settings. The server expects
 * `inlayHints.enable` where the extension's setting is `mlpl.inlayHints.shapes`,
 * so the mapping is explicit.
 */

/** The extension settings that concern the language server. */
export interface ClientSettings {
  inlayHintsShapes: boolean;
  cudaDevice: string;
  mlxDevice: string;
  calibrationFile: string;
  docsUrl: string;
}

/** The JSON the language server accepts. Empty strings leave the server's default. */
export function serverSettings(s: ClientSettings): Record<string, unknown> {
  const estimates: Record<string, string> = {};
  if (s.cudaDevice) {
    estimates.cudaDevice = s.cudaDevice;
  }
  if (s.mlxDevice) {
    estimates.mlxDevice = s.mlxDevice;
  }
  if (s.calibrationFile) {
    estimates.calibrationFile = s.calibrationFile;
  }
  const out: Record<string, unknown> = { inlayHints: { enable: s.inlayHintsShapes }, estimates };
  if (s.docsUrl) {
    out.docsUrl = s.docsUrl;
  }
  return out;
}
