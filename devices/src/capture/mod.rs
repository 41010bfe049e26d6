//! Step capture (DESIGN §5): record the kernel calls of a `train` step, check
//! that two consecutive steps are the same computation, and replay the step
//! without the interpreter.
//!
//! The runtime runs the first iterations of a `train` body through a
//! [`Recorder`], a backend that forwards every kernel to the real one and
//! writes it into a [`Trace`]. [`plan`] compares two consecutive traces and,
//! when they agree, says where each input of a step comes from (state carried
//! from the previous step, data that never changes, constants made on the
//! host); otherwise it gives the reason in words. [`compile`] turns the
//! [`StepPlan`] into a [`StepProgram`]: the backend's own compiled form when it
//! has one (the CPU runs the step in preallocated buffers, see
//! [`crate::cpu::program`]), else [`BackendReplay`], which calls the backend's
//! kernels again in order.
//!
//! Layout: [`Op`] (one kernel call as data and its metadata, generated from
//! the kernel table with the recorder's methods and [`replay`]), [`trace`] (the
//! recorded calls), [`recorder`], [`plan`],
//! [`program`] (the program interface and the generic replay), [`release`]
//! (the allocator hook told when recording starts and ends and when a step is
//! compiled).

pub mod plan;
pub mod program;
pub mod recorder;
pub mod release;
pub mod trace;

pub use crate::kernels::{replay, Op};
pub use plan::{plan, PlanInput, StepPlan};
pub use program::{ArenaBytes, BackendReplay, CallObserver, StepProgram};
pub use recorder::Recorder;
pub use release::{set_allocator_hook, AllocatorEvent};
pub use trace::{Call, Origin, Trace, ValueId, ValueInfo};

use crate::backend::{Backend, Result};
use std::sync::Arc;

/// The program that replays `plan` on `backend`: the backend's compiled form
/// ([`Backend::compile_step`]) when it has one, else a [`BackendReplay`].
/// The plan (and the recorded trace it holds) is dropped before this returns,
/// and the allocator hook is told ([`AllocatorEvent::StepCompiled`]).
pub fn compile(backend: Arc<dyn Backend>, plan: StepPlan) -> Result<Box<dyn StepProgram>> {
    let program = match backend.compile_step(&plan) {
        Some(program) => {
            drop(plan);
            program
        }
        None => Ok(Box::new(BackendReplay::new(backend, plan)) as Box<dyn StepProgram>),
    };
    release::notify(AllocatorEvent::StepCompiled);
    program
}

/// Tells the allocator hook again, as [`compile`] does, that memory freed
/// since should go back to the OS before the replays run
/// ([`AllocatorEvent::StepCompiled`]): for a caller that drops its own copy of
/// the carried state once the compiled program holds it.
pub fn released_after_compile() {
    release::notify(AllocatorEvent::StepCompiled);
}
