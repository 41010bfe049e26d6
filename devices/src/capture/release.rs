//! Giving memory back around step capture: the allocator hook.
//!
//! Recording the first two iterations of a loop makes every value of the step
//! a fresh allocation (the CPU's buffer pool is bypassed) that is freed when
//! the step drops it, and the compiled program then takes its own buffers (on
//! the CPU one arena, which a replay touches page by page). An allocator that
//! keeps freed pages committed for a while, or until the thread that freed
//! them allocates again (mimalloc does both), holds the recorded iterations'
//! memory on top of what they use, and keeps it for the whole replayed loop,
//! which allocates nothing: the loop's peak would be the recording's plus the
//! arena. The recorder and [`super::compile`] therefore tell the hook set here
//! when recording starts and ends and when a step has been compiled (its plan
//! dropped). The crate names no allocator; the binary that chooses one
//! installs the hook (`mlpl` gives mimalloc's freed pages back at once while
//! recording, and collects them after compiling).

use std::sync::Mutex;

/// What the allocator hook is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocatorEvent {
    /// A step's recording starts on this thread: its freed buffers should go
    /// back to the OS promptly.
    RecordingStarts,
    /// The recording ended (the allocator's usual behaviour can resume).
    RecordingEnds,
    /// A step was compiled and its plan dropped: freed memory should go back
    /// to the OS now, before the replays touch the program's buffers.
    StepCompiled,
}

static HOOK: Mutex<Option<fn(AllocatorEvent)>> = Mutex::new(None);

/// Sets the function told of [`AllocatorEvent`]s (replacing any earlier one;
/// `None` removes it).
pub fn set_allocator_hook(hook: Option<fn(AllocatorEvent)>) {
    *HOOK.lock().unwrap_or_else(|e| e.into_inner()) = hook;
}

/// Tells the hook, when one is set, of `event`.
pub(crate) fn notify(event: AllocatorEvent) {
    let hook = *HOOK.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(f) = hook {
        f(event);
    }
}
