import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ellipsize, formatBytes, formatDuration, formatLoss, formatRate, stepModeText } from "../src/core/format";
import { isLoopbackUrl, readServeLine, type ServeAnnouncement } from "../src/core/serveOutput";
import { serverSettings } from "../src/core/serverSettings";
import { describeVariable, shownVariables } from "../src/core/variables";
import type { Variable } from "../src/runner/client";

describe("readServeLine", () => {
  it("reads the address and the generated token", () => {
    const a: ServeAnnouncement = {};
    expect(readServeLine("mlpl serve listening on http://127.0.0.1:41877", a)).toBe(true);
    expect(readServeLine("token: 6f1d2cabc", a)).toBe(true);
    expect(readServeLine("restored 2 sessions", a)).toBe(false);
    expect(a).toEqual({ url: "http://127.0.0.1:41877", token: "6f1d2cabc" });
  });
  it("accepts IPv6 loopback and trailing slashes", () => {
    const a: ServeAnnouncement = {};
    readServeLine("mlpl serve listening on http://[::1]:9000/\r", a);
    expect(a.url).toBe("http://[::1]:9000");
  });
  it("tells loopback URLs apart", () => {
    expect(isLoopbackUrl("http://127.0.0.1:7878")).toBe(true);
    expect(isLoopbackUrl("http://localhost:7878")).toBe(true);
    expect(isLoopbackUrl("http://[::1]:7878")).toBe(true);
    expect(isLoopbackUrl("http://10.0.0.2:7878")).toBe(false);
    expect(isLoopbackUrl("not a url")).toBe(false);
  });
});

describe("serverSettings", () => {
  it("maps the extension settings to the names the language server reads", () => {
    expect(serverSettings({ inlayHintsShapes: false, cudaDevice: "h100", mlxDevice: "", calibrationFile: "", docsUrl: "https://d/x" })).toEqual({
      inlayHints: { enable: false },
      estimates: { cudaDevice: "h100" },
      docsUrl: "https://d/x",
    });
  });
});

describe("stepModeText", () => {
  it("says whether train steps are replayed, and why not", () => {
    expect(stepModeText({ mode: "captured", reason: null })).toBe("captured: replayed from the first two iterations");
    expect(stepModeText({ mode: "eager", reason: "the body reads `step`" })).toBe("interpreted: the body reads `step`");
    expect(stepModeText({ mode: "eager", reason: null })).toBe("interpreted");
  });
});

describe("format", () => {
  it("formats durations, bytes, rates and losses", () => {
    expect(formatDuration(850)).toBe("850 ms");
    expect(formatDuration(12_345)).toBe("12.3 s");
    expect(formatDuration(245_000)).toBe("4 min 05 s");
    expect(formatDuration(2 * 3600_000 + 3 * 60_000)).toBe("2 h 03 min");
    expect(formatDuration(-1)).toBe("—");
    expect(formatBytes(512)).toBe("512 B");
    expect(formatBytes(1536)).toBe("1.5 KiB");
    expect(formatRate(1234)).toBe("1.23k steps/s");
    expect(formatRate(null)).toBe("—");
    expect(formatLoss(0.000012345)).toBe("1.234e-5");
    expect(formatLoss(2.5)).toBe("2.500");
    expect(ellipsize("a  b\nc", 10)).toBe("a b c");
    expect(ellipsize("abcdefghijkl", 5)).toBe("abcd…");
  });
});

// The grammar's patterns are Oniguruma regexes; these use only the subset that
// JavaScript shares, so they can be checked here.
describe("TextMate grammar", () => {
  const g = JSON.parse(readFileSync(join(__dirname, "..", "syntaxes", "mlpl.tmLanguage.json"), "utf8"));
  const rx = (name: string) => new RegExp(g.repository[name].match, "g");
  const all = (name: string, text: string) => [...text.matchAll(rx(name))].map((m) => m[0]);
  it("matches numbers with exponents and digit separators, not identifiers' digits", () => {
    expect(all("number", "a = 1e-4 + 2.5E3 * 6.02e+23 - 4_000 + x1")).toEqual(["1e-4", "2.5E3", "6.02e+23", "4_000"]);
    expect(all("number", "lr = 2e")).toEqual(["2"]);
  });
  it("matches keywords, cell markers, comments and builtin calls", () => {
    expect(all("keyword", "train 3 { for x in y { } } device(\"cpu\") { } trains")).toEqual(["train", "for", "in", "device"]);
    expect(new RegExp(g.repository["cell-marker"].match).exec("# %% Train")?.[2]).toBe(" Train");
    expect(all("comment", "x = 1 # note")).toEqual(["# note"]);
    expect(all("builtin-call", "matmul(X, W) + matmul + cross_entropy (a, b)")).toEqual(["matmul", "cross_entropy"]);
  });
  it("has an axis-annotation rule that starts at `: [`", () => {
    expect(new RegExp(g.repository["axis-annotation"].begin).test("X : [batch, feat] = x")).toBe(true);
  });
});

describe("variables view", () => {
  const v = (over: Partial<Variable>): Variable => ({
    name: "x", kind: "array", shape: [2], named_shape: "[feat=2]", dtype: "f32", device: "cpu",
    param: false, frozen: false, parameters: null, preview: "[1, 2]", ...over,
  });
  it("hides the runtime's own bindings", () => {
    expect(shownVariables([v({ name: "__linear_W_0" }), v({ name: "W" })]).map((x) => x.name)).toEqual(["W"]);
    // The runner's `generated` flag decides when present.
    const marked = [v({ name: "__linear_W_0", generated: true }), v({ name: "__mine", generated: false })];
    expect(shownVariables(marked).map((x) => x.name)).toEqual(["__mine"]);
  });
  it("describes kind, named shape, device and parameter state", () => {
    expect(describeVariable(v({ param: true }))).toBe("array · [feat=2] · cpu · param");
    expect(describeVariable(v({ param: true, frozen: true, device: null }))).toBe("array · [feat=2] · frozen");
    expect(describeVariable(v({ kind: "model", named_shape: null, device: null, parameters: ["a", "b"] }))).toBe("model · 2 parameter tensors");
  });
});
