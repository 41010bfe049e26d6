//! Memory budgets (docs/limits.md): every result an operation allocates is
//! checked first against the largest array MLPL makes, the calling thread's
//! budget of one result, the session's budget of all its live values together,
//! and, for large results, the host memory available. A refusal is E0410 with
//! the bytes asked and the limit, never an allocation failure that ends the
//! process.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use mlpl_devices::{Storage, Tensor};
use mlpl_diag::{code, Diagnostic, Span};

use crate::eval::Workspace;
use crate::value::Value;

/// E0410 when a result of `shape` would exceed the largest array MLPL allocates
/// ([`crate::builtins::MAX_ELEMENTS`]), the calling thread's memory budget
/// ([`set_memory_budget`]), its session's budget ([`set_session_budget`]) or,
/// for results of [`PROBE_BYTES`] and more, the host memory available now: a
/// diagnostic instead of an allocation failure that would end the process
/// (LANGUAGE §6.5, docs/limits.md).
pub fn check_size(op: &str, shape: &[usize], span: Span) -> Result<(), Diagnostic> {
    let sizes = || {
        shape
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("×")
    };
    let n = match shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)) {
        Some(n) if n <= crate::builtins::MAX_ELEMENTS => n,
        _ => {
            return Err(Diagnostic::of(code::E0410)
                .at(span, format!("`{op}` would create {} elements", sizes())))
        }
    };
    let bytes = n.saturating_mul(4);
    match over_budget(bytes) {
        Some(r) => Err(r.explain(
            Diagnostic::of(code::E0410)
                .at(span, format!("`{op}` would create {} elements", sizes())),
        )),
        None => Ok(()),
    }
}

/// E0410 when `bytes` for a result of `op` are over this thread's budget, its
/// session's or, from [`PROBE_BYTES`] up, over the memory available.
pub fn check_bytes(op: &str, bytes: usize, span: Span) -> Result<(), Diagnostic> {
    match over_budget(bytes) {
        Some(r) => Err(r.explain(
            Diagnostic::of(code::E0410).at(span, format!("`{op}` would allocate {bytes} bytes")),
        )),
        None => Ok(()),
    }
}

/// A vector of `n` copies of `v`, or E0410 when the allocation fails (a fallible
/// reservation: the allocator's refusal is an error in this run, not an abort).
pub fn try_filled(op: &str, n: usize, v: f32, span: Span) -> Result<Vec<f32>, Diagnostic> {
    let mut data = Vec::new();
    data.try_reserve_exact(n).map_err(|_| {
        Diagnostic::of(code::E0410).at(span, format!("`{op}` could not allocate {n} elements"))
    })?;
    data.resize(n, v);
    Ok(data)
}

/// Results this large (64 MiB) are also checked against the host memory
/// available (`MemAvailable` in /proc/meminfo, where there is one).
pub const PROBE_BYTES: usize = 64 << 20;

/// A session's budget for all its live values together
/// ([`set_session_budget`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionBudget {
    /// The most bytes the session's variables and a new result may hold.
    pub limit: usize,
    /// How a user raises it, for the refusal's help (e.g. a command-line flag).
    pub raise: String,
}

/// What a workspace's values hold in memory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveMemory {
    /// Bytes of distinct storage held by variables, strings and optimizer state
    /// (arrays sharing storage are counted once).
    pub bytes: usize,
    /// The variables holding the most, largest first (at most three), with
    /// the bytes first counted for each.
    pub largest: Vec<(String, usize)>,
}

struct SessionState {
    budget: SessionBudget,
    live: LiveMemory,
}

thread_local! {
    static BUDGET: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
    static SESSION: RefCell<Option<SessionState>> = const { RefCell::new(None) };
}

/// Sets the largest single result, in bytes, that operations on this thread may
/// allocate (`None`: no budget beyond [`crate::builtins::MAX_ELEMENTS`] and the
/// memory available). A `mlpl serve` session sets it on its worker thread.
pub fn set_memory_budget(bytes: Option<usize>) {
    BUDGET.with(|b| b.set(bytes));
}

/// This thread's budget ([`set_memory_budget`]).
pub fn memory_budget() -> Option<usize> {
    BUDGET.with(|b| b.get())
}

/// Sets the budget of the session whose interpreter runs on this thread: a
/// result is refused when, with the values its workspace holds
/// ([`note_live`]), it would pass `budget.limit` (`None`: no session budget).
pub fn set_session_budget(budget: Option<SessionBudget>) {
    SESSION.with(|s| {
        *s.borrow_mut() = budget.map(|budget| SessionState {
            budget,
            live: LiveMemory::default(),
        })
    });
}

/// This thread's session budget ([`set_session_budget`]).
pub fn session_budget() -> Option<SessionBudget> {
    SESSION.with(|s| s.borrow().as_ref().map(|st| st.budget.clone()))
}

/// Records what `ws` holds now, for the session budget's checks: called when a
/// run starts and after each of its top-level statements. Does nothing without
/// a session budget.
pub fn note_live(ws: &Workspace) {
    if has_session_budget() {
        let live = live_memory(ws);
        SESSION.with(|s| {
            if let Some(st) = s.borrow_mut().as_mut() {
                st.live = live;
            }
        });
    }
}

/// Records that a binding changed from `old` to `new` between two
/// [`note_live`]s: the session's count moves by the difference of their sizes
/// (storage shared with other variables is counted again until the next
/// [`note_live`], on the safe side). Does nothing without a session budget.
pub fn note_rebind(name: &str, old: Option<&Value>, new: &Value) {
    if !has_session_budget() {
        return;
    }
    let (gone, added) = (old.map_or(0, value_bytes), value_bytes(new));
    SESSION.with(|s| {
        if let Some(st) = s.borrow_mut().as_mut() {
            st.live.bytes = st.live.bytes.saturating_add(added).saturating_sub(gone);
            let largest = &mut st.live.largest;
            largest.retain(|(n, _)| n != name);
            if added > 0 {
                largest.push((name.to_string(), added));
            }
            sort_largest(largest);
        }
    });
}

/// Records that a binding made since the last [`note_live`] is gone (a
/// function call's local at its return): the session's count drops by its
/// size. Does nothing without a session budget.
pub fn note_unbind(name: &str, old: &Value) {
    if !has_session_budget() {
        return;
    }
    let gone = value_bytes(old);
    SESSION.with(|s| {
        if let Some(st) = s.borrow_mut().as_mut() {
            st.live.bytes = st.live.bytes.saturating_sub(gone);
            st.live.largest.retain(|(n, _)| n != name);
        }
    });
}

/// How a refusal names a function call's local `name` of `function` among the
/// largest holders.
pub fn local_label(name: &str, function: &str) -> String {
    format!("`{name}` (local to `{function}`)")
}

/// Largest first (ties by name); at most [`LARGEST`] kept.
fn sort_largest(v: &mut Vec<(String, usize)>) {
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.truncate(LARGEST);
}

/// How many of the largest variables a refusal names.
const LARGEST: usize = 3;

fn has_session_budget() -> bool {
    SESSION.with(|s| s.borrow().is_some())
}

/// The memory `ws`'s values hold: every distinct tensor storage and string of
/// its variables and its optimizers' state.
pub fn live_memory(ws: &Workspace) -> LiveMemory {
    let mut seen = HashSet::new();
    let mut per_name: Vec<(String, usize)> = Vec::new();
    let mut names: Vec<&String> = ws.bindings.keys().collect();
    names.sort_unstable();
    let mut total = 0usize;
    for name in names {
        let bytes = distinct_bytes(&ws.bindings[name], &mut seen);
        total = total.saturating_add(bytes);
        if bytes > 0 {
            per_name.push((name.clone(), bytes));
        }
    }
    let mut optim: HashMap<&str, usize> = HashMap::new();
    for ((_, param), st) in &ws.optim {
        let mut b = tensor_bytes(&st.m, &mut seen);
        if let Some(v) = &st.v {
            b = b.saturating_add(tensor_bytes(v, &mut seen));
        }
        total = total.saturating_add(b);
        *optim.entry(param.as_str()).or_default() += b;
    }
    per_name.extend(
        optim
            .into_iter()
            .filter(|&(_, b)| b > 0)
            .map(|(p, b)| (format!("optimizer state of `{p}`"), b)),
    );
    sort_largest(&mut per_name);
    LiveMemory {
        bytes: total,
        largest: per_name,
    }
}

/// The bytes of `v`, storage shared with anything in `seen` not counted.
fn distinct_bytes(v: &Value, seen: &mut HashSet<usize>) -> usize {
    match v {
        Value::Array(a) => a.tensor_ref().map_or(0, |t| tensor_bytes(t, seen)),
        Value::Str(s) => {
            if seen.insert(s.as_ptr() as usize) {
                s.len()
            } else {
                0
            }
        }
        // A model's parameters are variables of their own; tokenizers are small.
        Value::Model(_) | Value::Tokenizer(_) => 0,
    }
}

/// The bytes of `v` alone.
fn value_bytes(v: &Value) -> usize {
    distinct_bytes(v, &mut HashSet::new())
}

fn tensor_bytes(t: &Tensor, seen: &mut HashSet<usize>) -> usize {
    let key = match t.storage() {
        Storage::Host(a) => std::sync::Arc::as_ptr(a) as usize,
        Storage::Device(d) => std::sync::Arc::as_ptr(d) as usize,
    };
    if seen.insert(key) {
        t.numel().saturating_mul(4)
    } else {
        0
    }
}

/// The host memory available now, in bytes, where the system says.
pub fn available_memory() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb.saturating_mul(1024))
}

/// Why a result of some bytes is refused: which limit it passes.
enum Refusal {
    Result {
        bytes: usize,
        limit: usize,
    },
    Session {
        bytes: usize,
        live: LiveMemory,
        budget: SessionBudget,
    },
    Host {
        bytes: usize,
        available: usize,
    },
}

impl Refusal {
    /// `d` with the notes and help that say which limit and how far.
    fn explain(self, d: Diagnostic) -> Diagnostic {
        match self {
            Refusal::Result { bytes, limit } => d.note(format!(
                "{bytes} bytes asked; the memory budget of one result is {limit} bytes"
            )),
            Refusal::Host { bytes, available } => d.note(format!(
                "{bytes} bytes asked; the host memory available is {available} bytes"
            )),
            Refusal::Session {
                bytes,
                live,
                budget,
            } => {
                let holders = live
                    .largest
                    .iter()
                    .map(|(n, b)| {
                        // Optimizer state and locals come with their quotes.
                        if n.contains('`') {
                            format!("{n} {b}")
                        } else {
                            format!("`{n}` {b}")
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                let held = if holders.is_empty() {
                    format!("the session holds {} bytes", live.bytes)
                } else {
                    format!(
                        "the session holds {} bytes (largest: {holders})",
                        live.bytes
                    )
                };
                d.note(format!(
                    "{bytes} bytes asked; {held}; the session's memory budget is {} bytes",
                    budget.limit
                ))
                .help(format!(
                    "free variables the session no longer needs (assign them a small value), or raise the budget with {}",
                    budget.raise
                ))
            }
        }
    }
}

/// The limit a result of `bytes` passes, if any: this thread's budget of one
/// result, its session's budget with what the session holds, or, from
/// [`PROBE_BYTES`] up, the host memory available.
fn over_budget(bytes: usize) -> Option<Refusal> {
    if let Some(limit) = memory_budget() {
        if bytes > limit {
            return Some(Refusal::Result { bytes, limit });
        }
    }
    let session = SESSION.with(|s| {
        s.borrow().as_ref().and_then(|st| {
            (st.live.bytes.saturating_add(bytes) > st.budget.limit).then(|| Refusal::Session {
                bytes,
                live: st.live.clone(),
                budget: st.budget.clone(),
            })
        })
    });
    if session.is_some() {
        return session;
    }
    if bytes >= PROBE_BYTES {
        if let Some(available) = available_memory() {
            if bytes > available {
                return Some(Refusal::Host { bytes, available });
            }
        }
    }
    None
}
