//! The guard in front of the protocol: every byte a client sends passes through a
//! [`Framer`] before tower-lsp sees it, so no frame can end the server.
//!
//! tower-lsp's reader stops for good at the first frame it cannot decode (a
//! missing or non-numeric `Content-Length`, a body that is not UTF-8 or not JSON,
//! a lone surrogate escape such as `"\ud800"`, which serde refuses in a string,
//! or JSON that is no JSON-RPC message) and the server then exits with status 0.
//! Here each such frame is answered with a JSON-RPC error (`-32700` parse error
//! or `-32600` invalid request, `id` null unless the frame names one) written
//! between the server's own frames, and reading goes on at the next
//! `Content-Length` header. Lone surrogate escapes are repaired (each becomes
//! `\ufffd`, the replacement character) rather than refused, so an editor that
//! splits a surrogate pair between two edits keeps its document. A declared
//! length past the end of the message (the next frame's header follows a complete
//! JSON value) is noticed without waiting for bytes that never come; a frame over
//! [`MAX_FRAME`] bytes is refused without being buffered (docs/limits.md).

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// The largest frame body accepted, in bytes (64 MiB): a document and its edit
/// fit many times over; a larger declared length is answered with an error.
pub const MAX_FRAME: usize = 64 << 20;
/// The longest header block kept while looking for its end, in bytes.
pub const MAX_HEADER: usize = 8 << 10;

const CONTENT_LENGTH: &[u8] = b"Content-Length:";

/// What the guard makes of the next frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// A well-formed JSON-RPC message (its body, repaired), for the server.
    Message(Vec<u8>),
    /// A frame that was skipped, with the error response to send the client.
    Reject(Value),
}

enum State {
    Headers,
    Body { len: usize, scanned: usize },
}

/// Splits a byte stream into frames, never failing: bytes in, [`Frame`]s out.
pub struct Framer {
    buf: Vec<u8>,
    state: State,
}

impl Default for Framer {
    fn default() -> Self {
        Framer::new()
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.len() > hay.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A JSON-RPC error response with `id` null.
pub fn error_response(code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "error": {"code": code, "message": message}, "id": null})
}

fn parse_error(why: &str) -> Frame {
    Frame::Reject(error_response(-32700, &format!("Parse error: {why}")))
}

impl Framer {
    pub fn new() -> Framer {
        Framer {
            buf: Vec::new(),
            state: State::Headers,
        }
    }

    /// Appends bytes read from the client.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held, waiting for the rest of a frame.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// The next frame, or `None` when more bytes are needed.
    pub fn next_frame(&mut self) -> Option<Frame> {
        loop {
            match self.state {
                State::Headers => {
                    let Some(end) = find(&self.buf, b"\r\n\r\n") else {
                        if self.buf.len() <= MAX_HEADER {
                            return None;
                        }
                        // No header end in sight: keep only what may start one.
                        let keep = match find(&self.buf[1..], CONTENT_LENGTH) {
                            Some(p) => p + 1,
                            None => self.buf.len() - (CONTENT_LENGTH.len() - 1),
                        };
                        self.buf.drain(..keep);
                        return Some(parse_error("a header block without an end"));
                    };
                    let block = self.buf[..end].to_vec();
                    match find(&block, CONTENT_LENGTH) {
                        Some(p)
                            if block[..p].iter().any(|b| !b.is_ascii_whitespace())
                                && !header_lines_before(&block[..p]) =>
                        {
                            // Bytes that are not headers before the next header
                            // (the rest of a frame whose length was too short).
                            self.buf.drain(..p);
                            return Some(parse_error("bytes outside any frame"));
                        }
                        Some(p) => {
                            self.buf.drain(..end + 4);
                            let line_end =
                                find(&block[p..], b"\r\n").map_or(block.len(), |e| p + e);
                            let value = &block[p + CONTENT_LENGTH.len()..line_end];
                            let len = std::str::from_utf8(value)
                                .ok()
                                .and_then(|v| v.trim().parse::<usize>().ok());
                            match len {
                                None => {
                                    return Some(parse_error(
                                        "a Content-Length that is not a number",
                                    ))
                                }
                                Some(n) if n > MAX_FRAME => {
                                    // Its body (if it comes) is read as bytes outside
                                    // any frame, up to the next header.
                                    return Some(Frame::Reject(error_response(
                                        -32700,
                                        &format!(
                                            "Parse error: a frame of {n} bytes is over the limit of {MAX_FRAME}"
                                        ),
                                    )));
                                }
                                Some(n) => self.state = State::Body { len: n, scanned: 0 },
                            }
                        }
                        None => {
                            self.buf.drain(..end + 4);
                            if block.iter().all(|b| b.is_ascii_whitespace()) {
                                continue;
                            }
                            return Some(parse_error("a frame without Content-Length"));
                        }
                    }
                }
                State::Body { len, scanned } => {
                    // A length past the end of the message: the next header
                    // follows a complete JSON value inside the declared body.
                    let end = self.buf.len().min(len.saturating_add(CONTENT_LENGTH.len()));
                    let from = scanned.saturating_sub(CONTENT_LENGTH.len()).min(end);
                    let mut at = from;
                    while let Some(p) = find(&self.buf[at..end], CONTENT_LENGTH).map(|p| p + at) {
                        let mut values = serde_json::Deserializer::from_slice(&self.buf[..p])
                            .into_iter::<serde::de::IgnoredAny>();
                        let complete = matches!(values.next(), Some(Ok(_)))
                            && self.buf[values.byte_offset()..p]
                                .iter()
                                .all(|b| b.is_ascii_whitespace());
                        if complete && p < len {
                            let body: Vec<u8> = self.buf[..values.byte_offset()].to_vec();
                            self.buf.drain(..p);
                            self.state = State::Headers;
                            return Some(validate(body));
                        }
                        at = p + 1;
                    }
                    if self.buf.len() >= len {
                        let body: Vec<u8> = self.buf.drain(..len).collect();
                        self.state = State::Headers;
                        if body.iter().all(|b| b.is_ascii_whitespace()) {
                            continue;
                        }
                        return Some(validate(body));
                    }
                    self.state = State::Body { len, scanned: end };
                    return None;
                }
            }
        }
    }
}

/// Whether `prefix` (what precedes `Content-Length:` in a header block) is whole
/// header lines (`Content-Type: …\r\n`), not stray bytes.
fn header_lines_before(prefix: &[u8]) -> bool {
    if !prefix.ends_with(b"\r\n") {
        return false;
    }
    prefix[..prefix.len() - 2]
        .split(|&b| b == b'\n')
        .all(|line| {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            match line.iter().position(|&b| b == b':') {
                Some(c) => {
                    c > 0
                        && line[..c]
                            .iter()
                            .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
                }
                None => false,
            }
        })
}

/// Checks a frame's body: UTF-8, JSON (lone surrogates repaired), and a JSON-RPC
/// request, notification or response.
fn validate(body: Vec<u8>) -> Frame {
    let Ok(text) = String::from_utf8(body) else {
        return parse_error("the body is not UTF-8");
    };
    let text = repair_surrogates(&text);
    let value: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => return parse_error(&e.to_string()),
    };
    let is_message = serde_json::from_value::<tower_lsp::jsonrpc::Request>(value.clone()).is_ok()
        || serde_json::from_value::<tower_lsp::jsonrpc::Response>(value.clone()).is_ok();
    if !is_message {
        let id = match value.get("id") {
            Some(id @ (Value::Number(_) | Value::String(_))) => id.clone(),
            _ => Value::Null,
        };
        return Frame::Reject(json!({
            "jsonrpc": "2.0",
            "error": {"code": -32600, "message": "Invalid request: not a JSON-RPC 2.0 message"},
            "id": id,
        }));
    }
    Frame::Message(text.into_owned().into_bytes())
}

/// Replaces every `\uXXXX` escape of a lone surrogate (a high one not followed
/// by a low one, or a low one alone) inside JSON strings by `\ufffd`.
pub fn repair_surrogates(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("\\u") && !text.contains("\\U") {
        return std::borrow::Cow::Borrowed(text);
    }
    let b = text.as_bytes();
    let hex_at = |i: usize| -> Option<u16> {
        let s = b.get(i..i + 6)?;
        if s[0] != b'\\' || s[1] != b'u' {
            return None;
        }
        u16::from_str_radix(std::str::from_utf8(&s[2..]).ok()?, 16).ok()
    };
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    let mut i = 0;
    let mut in_string = false;
    while i < b.len() {
        match b[i] {
            b'"' => {
                in_string = !in_string;
                i += 1;
            }
            b'\\' if in_string => {
                if let Some(u) = hex_at(i) {
                    let high = (0xD800..0xDC00).contains(&u);
                    let low = (0xDC00..0xE000).contains(&u);
                    if high && hex_at(i + 6).is_some_and(|v| (0xDC00..0xE000).contains(&v)) {
                        i += 12;
                        continue;
                    }
                    if high || low {
                        out.push_str(&text[last..i]);
                        out.push_str("\\ufffd");
                        i += 6;
                        last = i;
                        continue;
                    }
                    i += 6;
                } else {
                    i += 2;
                }
            }
            _ => i += 1,
        }
    }
    if last == 0 {
        return std::borrow::Cow::Borrowed(text);
    }
    out.push_str(&text[last..]);
    std::borrow::Cow::Owned(out)
}

fn frame_bytes(body: &[u8]) -> Vec<u8> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out
}

/// Serves the language server on `input`/`output` behind the guard: the server
/// ends when `input` ends or the client sends `exit`, never on a malformed frame.
pub async fn serve<I, O>(input: I, mut output: O)
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
{
    let (mut to_server, server_in) = tokio::io::duplex(1 << 16);
    let (server_out, from_server) = tokio::io::duplex(1 << 16);
    let (reject_tx, mut reject_rx) = mpsc::unbounded_channel::<Value>();
    let (service, socket) = tower_lsp::LspService::build(crate::Server::new)
        .custom_method(crate::measured::METHOD, crate::Server::step_measured)
        .finish();
    let server = tokio::spawn(tower_lsp::Server::new(server_in, server_out, socket).serve(service));

    let reader = tokio::spawn(async move {
        let mut input = input;
        let mut framer = Framer::new();
        let mut chunk = vec![0u8; 1 << 16];
        loop {
            let n = match input.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            framer.push(&chunk[..n]);
            while let Some(frame) = framer.next_frame() {
                match frame {
                    Frame::Message(body) => {
                        let exit = is_exit(&body);
                        if to_server.write_all(&frame_bytes(&body)).await.is_err() {
                            return;
                        }
                        if exit {
                            // The server reads `exit`, then the end of its
                            // input, and stops, though the client's input
                            // stays open.
                            let _ = to_server.shutdown().await;
                            return;
                        }
                    }
                    Frame::Reject(err) => {
                        let _ = reject_tx.send(err);
                    }
                }
            }
            let _ = to_server.flush().await;
        }
        // End of input: the server sees the end of its own input and stops.
        let _ = to_server.shutdown().await;
    });

    // The server's frames are well-formed; rejects go between them. Both arrive
    // whole through channels (a select never cancels a half-read frame), and a
    // reject goes first: it was queued before the frames that follow it reached
    // the server, so it precedes the answers to them.
    let (frames_tx, mut frames_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let pump = tokio::spawn(async move {
        let mut from_server = BufReader::new(from_server);
        while let Some(body) = read_frame(&mut from_server).await {
            if frames_tx.send(body).is_err() {
                break;
            }
        }
    });
    loop {
        let body = tokio::select! {
            biased;
            Some(err) = reject_rx.recv() => serde_json::to_vec(&err).unwrap_or_default(),
            frame = frames_rx.recv() => match frame {
                Some(body) => body,
                None => break,
            },
        };
        if output.write_all(&frame_bytes(&body)).await.is_err() {
            break;
        }
        let _ = output.flush().await;
    }
    reader.abort();
    pump.abort();
    let _ = server.await;
    let _ = output.flush().await;
}

/// Whether a message is the `exit` notification.
fn is_exit(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body).is_ok_and(|v| {
        v.get("method").and_then(Value::as_str) == Some("exit") && v.get("id").is_none()
    })
}

/// One frame from the server's own output.
async fn read_frame<R: tokio::io::AsyncBufRead + Unpin>(r: &mut R) -> Option<Vec<u8>> {
    let mut len = None;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            if len.is_some() {
                break;
            }
            continue;
        }
        if let Some(v) = line.strip_prefix("Content-Length:") {
            len = v.trim().parse::<usize>().ok();
        }
    }
    let mut buf = vec![0; len?];
    r.read_exact(&mut buf).await.ok()?;
    Some(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(input: &[u8]) -> Vec<Frame> {
        let mut f = Framer::new();
        f.push(input);
        std::iter::from_fn(|| f.next_frame()).collect()
    }

    fn msg(body: &str) -> Vec<u8> {
        frame_bytes(body.as_bytes())
    }

    const PING: &str = r#"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"#;

    #[test]
    fn good_frames_pass_through() {
        let mut input = msg(PING);
        input.extend(msg(PING));
        assert_eq!(
            frames(&input),
            vec![Frame::Message(PING.into()), Frame::Message(PING.into())]
        );
    }

    #[test]
    fn frames_split_anywhere_are_whole() {
        let input = msg(PING);
        for cut in 0..input.len() {
            let mut f = Framer::new();
            f.push(&input[..cut]);
            assert_eq!(f.next_frame(), None, "cut at {cut}");
            f.push(&input[cut..]);
            assert_eq!(f.next_frame(), Some(Frame::Message(PING.into())));
        }
    }

    #[test]
    fn lone_surrogates_are_repaired() {
        assert_eq!(
            repair_surrogates(r#"{"t":"a\ud800b"}"#),
            r#"{"t":"a\ufffdb"}"#
        );
        assert_eq!(repair_surrogates(r#"{"t":"\udc00"}"#), r#"{"t":"\ufffd"}"#);
        assert_eq!(
            repair_surrogates(r#"{"t":"\ud83d\ude00"}"#),
            r#"{"t":"\ud83d\ude00"}"#
        );
        assert_eq!(
            repair_surrogates(r#"{"t":"\\ud800"}"#),
            r#"{"t":"\\ud800"}"#
        );
        let body = r#"{"jsonrpc":"2.0","method":"x","params":{"t":"\ud800"}}"#;
        match &frames(&msg(body))[..] {
            [Frame::Message(m)] => {
                let v: Value = serde_json::from_slice(m).unwrap();
                assert_eq!(v["params"]["t"], "\u{fffd}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_frames_are_answered_and_reading_goes_on() {
        let mut input = msg("{not json");
        input.extend(msg(r#"{"hello": 1}"#));
        input.extend(msg(r#"{"jsonrpc":"2.0","id":7,"method":5}"#));
        input.extend(b"Content-Length: abc\r\n\r\n");
        input.extend(b"X-Nothing: 1\r\n\r\n");
        input.extend(msg("\u{0}\u{1}"));
        input.extend(frame_bytes(&[0xff, 0xfe]));
        input.extend(msg(PING));
        let out = frames(&input);
        assert_eq!(out.last(), Some(&Frame::Message(PING.into())));
        let codes: Vec<i64> = out[..out.len() - 1]
            .iter()
            .map(|f| match f {
                Frame::Reject(v) => v["error"]["code"].as_i64().unwrap(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            codes,
            vec![-32700, -32600, -32600, -32700, -32700, -32700, -32700]
        );
        match &out[2] {
            Frame::Reject(v) => assert_eq!(v["id"], 7),
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_short_content_length_resyncs_at_the_next_header() {
        let mut input = format!("Content-Length: {}\r\n\r\n{PING}", PING.len() - 5).into_bytes();
        input.extend(msg(PING));
        let out = frames(&input);
        assert!(matches!(out[0], Frame::Reject(_)), "{out:?}");
        assert_eq!(out.last(), Some(&Frame::Message(PING.into())));
        assert!(out[1..out.len() - 1]
            .iter()
            .all(|f| matches!(f, Frame::Reject(_))));
    }

    #[test]
    fn a_long_content_length_does_not_swallow_the_next_frame() {
        let mut input = format!("Content-Length: {}\r\n\r\n{PING}", PING.len() + 40).into_bytes();
        input.extend(msg(PING));
        assert_eq!(
            frames(&input),
            vec![Frame::Message(PING.into()), Frame::Message(PING.into())]
        );
    }

    #[test]
    fn an_oversized_frame_is_refused_unbuffered() {
        let mut input = format!("Content-Length: {}\r\n\r\n", MAX_FRAME + 1).into_bytes();
        input.extend(vec![b'x'; 100_000]);
        input.extend(msg(PING));
        let out = frames(&input);
        assert!(matches!(out[0], Frame::Reject(_)));
        assert_eq!(out.last(), Some(&Frame::Message(PING.into())));
        let mut f = Framer::new();
        f.push(format!("Content-Length: {}\r\n\r\n", MAX_FRAME + 1).as_bytes());
        assert!(matches!(f.next_frame(), Some(Frame::Reject(_))));
        for _ in 0..100 {
            f.push(&[b'y'; 10_000]);
            while f.next_frame().is_some() {}
        }
        assert!(f.pending() <= MAX_HEADER, "held {} bytes", f.pending());
    }

    proptest::proptest! {
        // A fixed seed for CI (PROPTEST_CASES and PROPTEST_RNG_SEED override it).
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 300,
            failure_persistence: None,
            rng_seed: proptest::test_runner::RngSeed::Fixed(16),
            ..Default::default()
        })]

        /// Any bytes, split anywhere: no panic, and nothing held past a header
        /// block's limit unless a frame's declared body is being read.
        #[test]
        fn any_bytes_in_any_chunks(
            parts in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
                    proptest::sample::select(vec![
                        b"Content-Length: 12\r\n\r\n".to_vec(),
                        b"Content-Length: 99999999999999999999\r\n\r\n".to_vec(),
                        b"\r\n\r\n".to_vec(),
                        br#"{"jsonrpc":"2.0","method":"x","params":{"t":"\ud800"}}"#.to_vec(),
                        msg(PING),
                    ]),
                ],
                0..30,
            )
        ) {
            let mut f = Framer::new();
            for p in &parts {
                f.push(p);
                while let Some(frame) = f.next_frame() {
                    if let Frame::Message(m) = frame {
                        proptest::prop_assert!(serde_json::from_slice::<Value>(&m).is_ok());
                    }
                }
            }
        }
    }
}
