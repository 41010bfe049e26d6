/**
 * Reading what `mlpl serve` prints on standard output when it starts:
 * `mlpl serve listening on http://ADDR`, then `token: TOKEN` when it generated
 * the token (docs/runner-protocol.md).
 */

/** What the runner announced so far. */
export interface ServeAnnouncement {
  url?: string;
  token?: string;
}

const LISTENING = /^mlpl serve listening on (http:\/\/\S+?)\/?\s*$/;
const TOKEN = /^token:\s*(\S+)\s*$/;

/** Updates `into` with one line of the runner's output; returns whether it matched. */
export function readServeLine(line: string, into: ServeAnnouncement): boolean {
  const l = LISTENING.exec(line.trim());
  if (l) {
    into.url = l[1];
    return true;
  }
  const t = TOKEN.exec(line.trim());
  if (t) {
    into.token = t[1];
    return true;
  }
  return false;
}

/** Whether a runner URL points at this machine (loopback), where a spawned runner lives. */
export function isLoopbackUrl(url: string): boolean {
  try {
    const h = new URL(url).hostname;
    return h === "localhost" || h === "[::1]" || h === "::1" || /^127\.\d+\.\d+\.\d+$/.test(h);
  } catch {
    return false;
  }
}
