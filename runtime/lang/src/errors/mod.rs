//! The diagnostics that both the checker and the interpreter report, one
//! constructor each, and the name suggestions in them. Both sides call these
//! functions, so a static and a runtime error read the same; this module sits
//! below both and uses neither (`docs/architecture.md`).

mod devices;
mod loss;
mod names;
mod shapes;
pub mod signature;
pub mod suggest;

pub use devices::{call_placement_conflict, device_error, device_mismatch_error};
pub use loss::literal_in_loss_error;
pub use names::undefined_name;
pub use shapes::{
    broadcast_name_error, broadcast_size_error, duplicate_name_warning, first_duplicate,
    label_count_error, relabel_help, stack_shape_error,
};
