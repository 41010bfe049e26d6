import { describe, expect, it } from "vitest";
import { SseParser } from "../src/core/sse";

describe("SseParser", () => {
  it("parses the runner's event framing", () => {
    const p = new SseParser();
    const msgs = p.push('event: step\nid: 17\ndata: {"seq":17}\n\n');
    expect(msgs).toEqual([{ event: "step", id: "17", data: '{"seq":17}' }]);
    expect(p.lastEventId).toBe("17");
  });

  it("joins messages split across chunks at any byte", () => {
    const text = 'event: a\nid: 1\ndata: one\n\n: keep-alive\n\nevent: b\nid: 2\ndata: two\ndata: lines\n\n';
    for (let cut = 0; cut <= text.length; cut++) {
      const p = new SseParser();
      const msgs = [...p.push(text.slice(0, cut)), ...p.push(text.slice(cut))];
      expect(msgs.map((m) => [m.event, m.id, m.data])).toEqual([
        ["a", "1", "one"],
        ["b", "2", "two\nlines"],
      ]);
    }
  });

  it("accepts CR LF and lone CR line ends, also with CR LF split across chunks", () => {
    const p = new SseParser();
    const msgs = [...p.push("data: x\r"), ...p.push("\n\r\n"), ...p.push("data: y\r\r")];
    expect(msgs.map((m) => m.data)).toEqual(["x", "y"]);
  });

  it("ignores comments, unknown fields and empty events; defaults the event name", () => {
    const p = new SseParser();
    expect(p.push(": comment\nretry: 10\nfoo: bar\n\n")).toEqual([]);
    expect(p.push("data:no-space\n\n")).toEqual([{ event: "message", id: undefined, data: "no-space" }]);
  });

  it("keeps the last id for later messages without one", () => {
    const p = new SseParser();
    const msgs = p.push("id: 5\ndata: a\n\ndata: b\n\n");
    expect(msgs.map((m) => m.id)).toEqual(["5", "5"]);
  });
});
