/** Short human-readable numbers for the panel, status bar and decorations. */

/** `850 ms`, `12.3 s`, `4 min 05 s`, `2 h 03 min`. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) {
    return "—";
  }
  if (ms < 1000) {
    return `${Math.round(ms)} ms`;
  }
  const s = ms / 1000;
  if (s < 60) {
    return `${s.toFixed(1)} s`;
  }
  const m = Math.floor(s / 60);
  if (m < 60) {
    return `${m} min ${String(Math.floor(s % 60)).padStart(2, "0")} s`;
  }
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, "0")} min`;
}

/** `512 B`, `1.5 KiB`, `3.2 MiB`, `1.1 GiB`. */
export function formatBytes(n: number): string {
  if (!Number.isFinite(n) || n < 0) {
    return "—";
  }
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let u = 0;
  let v = n;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${v} B` : `${v.toFixed(1)} ${units[u]}`;
}

/** A rate with three significant digits: `1.23k steps/s`, `45.6 steps/s`. */
export function formatRate(perS: number | null, unit = "steps/s"): string {
  if (perS === null || !Number.isFinite(perS)) {
    return "—";
  }
  if (perS >= 1e6) {
    return `${(perS / 1e6).toPrecision(3)}M ${unit}`;
  }
  if (perS >= 1e3) {
    return `${(perS / 1e3).toPrecision(3)}k ${unit}`;
  }
  return `${perS.toPrecision(3)} ${unit}`;
}

/** A loss value: 4 significant digits, exponent form for very small or large values. */
export function formatLoss(x: number | null): string {
  if (x === null || !Number.isFinite(x)) {
    return "—";
  }
  const a = Math.abs(x);
  return a !== 0 && (a < 1e-3 || a >= 1e5) ? x.toExponential(3) : x.toPrecision(4);
}

/** Shortens one line of text to `max` characters with an ellipsis. */
export function ellipsize(text: string, max: number): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length <= max ? line : `${line.slice(0, Math.max(0, max - 1))}…`;
}

/** How a `train` loop runs its steps, for the panel: captured (replayed) or interpreted, and why. */
export function stepModeText(m: { mode: string; reason: string | null }): string {
  if (m.mode === "captured") return "captured: replayed from the first two iterations";
  return m.reason ? `interpreted: ${m.reason}` : "interpreted";
}
