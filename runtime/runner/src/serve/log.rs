//! A session's event log: the serialised events kept for SSE clients, so that a
//! client can resume after `Last-Event-ID`, and a notification for new events.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::session::Event;

/// One logged event.
#[derive(Clone, Debug)]
pub struct Logged {
    /// Its `seq`.
    pub seq: u64,
    /// Its `type` (the SSE event name).
    pub kind: &'static str,
    /// Its run.
    pub run: Arc<str>,
    /// The event as one line of JSON.
    pub json: Arc<str>,
}

struct Inner {
    events: VecDeque<Logged>,
    /// The bytes of the events' JSON.
    bytes: usize,
    closed: bool,
}

/// The most bytes of event JSON a log keeps (64 MiB): past it the oldest events
/// go, as past the event count (docs/limits.md).
pub const LOG_BYTES: usize = 64 << 20;

/// The retained events of one session (the most recent `capacity`, and at
/// most `max_bytes` of JSON; the newest event is always kept).
pub struct EventLog {
    inner: Mutex<Inner>,
    notify: watch::Sender<u64>,
    capacity: usize,
    max_bytes: usize,
}

impl EventLog {
    /// An empty log that keeps at most `capacity` events (at least 1).
    pub fn new(capacity: usize) -> EventLog {
        EventLog::with_bytes(capacity, LOG_BYTES)
    }

    /// An empty log that keeps at most `capacity` events and `max_bytes` bytes
    /// of their JSON (the newest event always).
    pub fn with_bytes(capacity: usize, max_bytes: usize) -> EventLog {
        EventLog {
            inner: Mutex::new(Inner {
                events: VecDeque::new(),
                bytes: 0,
                closed: false,
            }),
            notify: watch::channel(0).0,
            capacity: capacity.max(1),
            max_bytes,
        }
    }

    /// The bytes of JSON held.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends an event (events arrive in `seq` order) and wakes the streams.
    pub fn push(&self, e: &Event) {
        let json = serde_json::to_string(e).unwrap_or_else(|err| {
            format!(
                "{{\"v\":{},\"session\":{:?},\"run\":{:?},\"seq\":{},\"time\":{},\"type\":\"{}\",\"error\":{:?}}}",
                e.v,
                e.session,
                e.run,
                e.seq,
                e.time,
                e.kind(),
                err.to_string()
            )
        });
        {
            let mut inner = self.lock();
            inner.bytes += json.len();
            inner.events.push_back(Logged {
                seq: e.seq,
                kind: e.kind(),
                run: Arc::from(e.run.as_str()),
                json: Arc::from(json),
            });
            while inner.events.len() > self.capacity
                || (inner.bytes > self.max_bytes && inner.events.len() > 1)
            {
                if let Some(old) = inner.events.pop_front() {
                    inner.bytes -= old.json.len();
                }
            }
        }
        self.notify.send_replace(e.seq);
    }

    /// Up to `max` events with `seq > after`, oldest first.
    pub fn after(&self, after: u64, max: usize) -> Vec<Logged> {
        let inner = self.lock();
        let start = inner.events.partition_point(|e| e.seq <= after);
        inner.events.range(start..).take(max).cloned().collect()
    }

    /// A receiver that changes whenever an event is pushed or the log closes.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.notify.subscribe()
    }

    /// Ends every stream (the session was deleted or the server stops).
    pub fn close(&self) {
        self.lock().closed = true;
        self.notify.send_modify(|_| {});
    }

    /// Whether the log was closed.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// The `seq` of the newest event (or the one set by [`EventLog::start_after`]).
    pub fn last_seq(&self) -> u64 {
        *self.notify.borrow()
    }

    /// Records that the session's events continue after `seq` (a restored session).
    pub fn start_after(&self, seq: u64) {
        self.notify.send_replace(seq);
    }

    /// Number of retained events.
    pub fn len(&self) -> usize {
        self.lock().events.len()
    }

    /// Whether no event is retained.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{EventBody, RunStatus};

    fn event(seq: u64) -> Event {
        Event {
            v: 1,
            session: "s".into(),
            run: "r".into(),
            seq,
            time: 0,
            body: EventBody::RunFinished {
                status: RunStatus::Ok,
                elapsed_ms: 1.0,
                diagnostic: None,
                saved: None,
                counters: None,
                memory: None,
            },
        }
    }

    #[test]
    fn the_byte_cap_drops_the_oldest_and_keeps_the_newest() {
        let one = serde_json::to_string(&event(1)).unwrap().len();
        let log = EventLog::with_bytes(1000, one * 3 + one / 2);
        for s in 1..=10 {
            log.push(&event(s));
        }
        let seqs: Vec<u64> = log.after(0, 100).iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![8, 9, 10]);
        assert!(log.bytes() <= one * 3 + one / 2 + 10, "{}", log.bytes());
        let tiny = EventLog::with_bytes(1000, 1);
        tiny.push(&event(1));
        tiny.push(&event(2));
        assert_eq!(
            tiny.after(0, 10).iter().map(|e| e.seq).collect::<Vec<_>>(),
            vec![2]
        );
    }

    #[test]
    fn keeps_the_newest_and_resumes_after_a_seq() {
        let log = EventLog::new(3);
        for s in 1..=5 {
            log.push(&event(s));
        }
        assert_eq!(log.len(), 3);
        let seqs: Vec<u64> = log.after(0, 10).iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![3, 4, 5]);
        let seqs: Vec<u64> = log.after(4, 10).iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![5]);
        assert!(log.after(5, 10).is_empty());
        assert_eq!(log.after(0, 1).len(), 1);
        assert!(log.after(0, 1)[0]
            .json
            .contains("\"type\":\"run_finished\""));
    }
}
