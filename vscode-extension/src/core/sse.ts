/**
 * Incremental parser for server-sent events (the `text/event-stream` format the
 * runner streams telemetry with). Feed it decoded text chunks as they arrive; it
 * returns the complete messages and keeps partial lines for the next chunk.
 */

/** One dispatched server-sent event. */
export interface SseMessage {
  /** The `event:` field, `message` when absent. */
  event: string;
  /** The `data:` lines joined with `\n`. */
  data: string;
  /** The `id:` field of this message, or the last id seen before it. */
  id: string | undefined;
}

/** Parses an event stream chunk by chunk (WHATWG HTML §9.2.6 rules). */
export class SseParser {
  private buffer = "";
  private event = "";
  private data: string[] = [];
  private lastId: string | undefined;
  private sawCr = false;

  /** The last event id seen (what a client sends as `Last-Event-ID` on reconnect). */
  get lastEventId(): string | undefined {
    return this.lastId;
  }

  /** Adds a chunk of text and returns the messages it completes. */
  push(chunk: string): SseMessage[] {
    const out: SseMessage[] = [];
    let text = chunk;
    // A CR at the end of the previous chunk may be the first half of CR LF.
    if (this.sawCr && text.startsWith("\n")) {
      text = text.slice(1);
    }
    this.sawCr = false;
    this.buffer += text;
    let start = 0;
    for (let i = 0; i < this.buffer.length; i++) {
      const c = this.buffer[i];
      if (c !== "\n" && c !== "\r") {
        continue;
      }
      const line = this.buffer.slice(start, i);
      if (c === "\r") {
        if (i + 1 < this.buffer.length) {
          if (this.buffer[i + 1] === "\n") {
            i++;
          }
        } else {
          this.sawCr = true;
        }
      }
      start = i + 1;
      const msg = this.line(line);
      if (msg) {
        out.push(msg);
      }
    }
    this.buffer = this.buffer.slice(start);
    return out;
  }

  private line(line: string): SseMessage | undefined {
    if (line === "") {
      if (this.data.length === 0) {
        this.event = "";
        return undefined;
      }
      const msg: SseMessage = {
        event: this.event || "message",
        data: this.data.join("\n"),
        id: this.lastId,
      };
      this.event = "";
      this.data = [];
      return msg;
    }
    if (line.startsWith(":")) {
      return undefined; // comment (keep-alive)
    }
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) {
      value = value.slice(1);
    }
    switch (field) {
      case "event":
        this.event = value;
        break;
      case "data":
        this.data.push(value);
        break;
      case "id":
        if (!value.includes("\0")) {
          this.lastId = value;
        }
        break;
      default:
        break; // `retry` and unknown fields are ignored
    }
    return undefined;
  }
}
