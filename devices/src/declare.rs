//! [`declare_backend!`]: the macro that turns the kernel table
//! (`crate::kernels`) into everything derived from it, so that a kernel is
//! declared once.
//!
//! From one entry per kernel it generates:
//! - the [`Backend`](crate::Backend) trait method (with its docs and, where
//!   given, its default body);
//! - the recorded [`Op`](crate::capture::Op) variant, its name, its input
//!   count and the element counts of its outputs;
//! - the capture [`Recorder`](crate::capture::Recorder)'s method, which runs the
//!   kernel and records it;
//! - [`Unfused`](crate::Unfused)'s method, which forwards it (a `fused` kernel is
//!   left to the trait's composed default instead);
//! - the replay of a recorded call ([`replay`](crate::capture::replay));
//! - [`Profiled`](crate::profile::Profiled)'s method, which times the call and
//!   logs it with its input shapes (timelines).
//!
//! An entry reads
//!
//! ```text
//! /// Docs of the trait method.
//! kernel fn softmax(&self, x: &Tensor, axis: usize) -> Result<Tensor>
//!     => Softmax { axis: usize } [x]
//!     sizes(ins) { axis_ok(ins[0], *axis)?; vec![n(ins[0])] };
//! ```
//!
//! `kernel` (a primitive), `fused` (has a composed default body that `Unfused`
//! runs) or `in_place` (updates its `&mut` tensors, listed after `->`, which
//! are recorded as its outputs). Then the method as the trait declares it;
//! after `=>` the op's variant with the method's non-tensor arguments of the
//! same names (stored owned: a `&[usize]` as a `Vec<usize>`), the tensor
//! arguments in the order they are the call's inputs, and the element count of
//! each output given the inputs' shapes (`ins`) and the fields (by reference),
//! or an error saying why the kernel would not accept them.

use crate::attention::AttentionSpec;
use crate::backend::{AdamStep, BinaryOp, DropoutKey, ReduceOp, UnaryOp};
use crate::tensor::Tensor;

/// A non-tensor argument of a kernel as a recorded [`Op`](crate::capture::Op)
/// stores it, and how a replay passes it back.
pub trait Attr {
    /// The argument's type in the method's signature.
    type Arg<'a>
    where
        Self: 'a;
    /// The argument for replay run `run` (0-based) of a call recorded with
    /// `self`: the recorded value, except where the attribute counts runs.
    fn replayed(&self, run: u64) -> Self::Arg<'_>;
}

/// Attributes passed back exactly as recorded.
macro_rules! copied_attrs {
    ($($t:ty),*) => {$(
        impl Attr for $t {
            type Arg<'a> = $t;
            fn replayed(&self, _run: u64) -> $t {
                *self
            }
        }
    )*};
}

copied_attrs!(
    usize,
    Option<usize>,
    bool,
    f32,
    f64,
    u64,
    UnaryOp,
    BinaryOp,
    ReduceOp,
    AttentionSpec
);

impl Attr for Vec<usize> {
    type Arg<'a> = &'a [usize];
    fn replayed(&self, _run: u64) -> &[usize] {
        self
    }
}

impl Attr for AdamStep {
    type Arg<'a> = AdamStep;
    /// The update count of replay run `run`: `run + 1` more than recorded.
    fn replayed(&self, run: u64) -> AdamStep {
        AdamStep {
            t: self.t + run + 1,
            ..*self
        }
    }
}

impl Attr for DropoutKey {
    type Arg<'a> = DropoutKey;
    /// The counter (the loop's `step`) of replay run `run`: `run + 1` more than
    /// recorded.
    fn replayed(&self, run: u64) -> DropoutKey {
        DropoutKey {
            counter: self.counter.wrapping_add(run + 1),
            ..*self
        }
    }
}

/// What a kernel returns, as the tensors a recorded call outputs.
pub trait Outputs: Sized {
    /// The output tensors, in order (an absent optional one is left out).
    fn refs(&self) -> Vec<&Tensor>;
    /// The same, owned.
    fn into_tensors(self) -> Vec<Tensor>;
    /// The same outputs with `f` applied to each tensor (moving a CPU
    /// fallback's results to the device, see [`CpuFallback`](crate::CpuFallback)).
    fn try_map(self, f: &mut dyn FnMut(Tensor) -> crate::Result<Tensor>) -> crate::Result<Self>;
}

impl Outputs for Tensor {
    fn refs(&self) -> Vec<&Tensor> {
        vec![self]
    }
    fn into_tensors(self) -> Vec<Tensor> {
        vec![self]
    }
    fn try_map(self, f: &mut dyn FnMut(Tensor) -> crate::Result<Tensor>) -> crate::Result<Self> {
        f(self)
    }
}

impl Outputs for Option<Tensor> {
    fn refs(&self) -> Vec<&Tensor> {
        self.iter().collect()
    }
    fn into_tensors(self) -> Vec<Tensor> {
        self.into_iter().collect()
    }
    fn try_map(self, f: &mut dyn FnMut(Tensor) -> crate::Result<Tensor>) -> crate::Result<Self> {
        self.map(f).transpose()
    }
}

impl Outputs for (Tensor, Option<Tensor>) {
    fn refs(&self) -> Vec<&Tensor> {
        std::iter::once(&self.0).chain(self.1.as_ref()).collect()
    }
    fn into_tensors(self) -> Vec<Tensor> {
        std::iter::once(self.0).chain(self.1).collect()
    }
    fn try_map(self, f: &mut dyn FnMut(Tensor) -> crate::Result<Tensor>) -> crate::Result<Self> {
        Ok((f(self.0)?, self.1.map(&mut *f).transpose()?))
    }
}

impl Outputs for (Tensor, Tensor) {
    fn refs(&self) -> Vec<&Tensor> {
        vec![&self.0, &self.1]
    }
    fn into_tensors(self) -> Vec<Tensor> {
        vec![self.0, self.1]
    }
    fn try_map(self, f: &mut dyn FnMut(Tensor) -> crate::Result<Tensor>) -> crate::Result<Self> {
        Ok((f(self.0)?, f(self.1)?))
    }
}

impl Outputs for (Tensor, Tensor, Tensor) {
    fn refs(&self) -> Vec<&Tensor> {
        vec![&self.0, &self.1, &self.2]
    }
    fn into_tensors(self) -> Vec<Tensor> {
        vec![self.0, self.1, self.2]
    }
    fn try_map(self, f: &mut dyn FnMut(Tensor) -> crate::Result<Tensor>) -> crate::Result<Self> {
        Ok((f(self.0)?, f(self.1)?, f(self.2)?))
    }
}

/// `t` in host memory: itself when it is there, else a host tensor of its
/// elements (read once and counted by its device, see [`Tensor::host`]).
pub fn host_copy(t: &Tensor) -> Tensor {
    if t.is_host() {
        t.clone()
    } else {
        Tensor::from_vec(t.shape().to_vec(), t.to_vec())
    }
}

/// Generates the trait, the op, the recorder, `Unfused` and the replay from
/// the kernel table (see the module docs for an entry's form).
macro_rules! declare_backend {
    (
        $(
            $(#[$doc:meta])*
            $kind:ident fn $method:ident(&$self:ident $(, $arg:ident: $aty:ty)*) -> Result<$ret:ty>
                $($default:block)?
                => $variant:ident $({ $($field:ident: $fty:ty),* })? [$($input:ident),*]
                   $(-> [$($out:ident),*])?
                sizes($ins:ident) $sizes:block;
        )*
    ) => {
        /// The primitive kernels every device implements.
        ///
        /// All inputs are assumed valid: the runtime checks shapes and reports
        /// language diagnostics before calling. Errors are only device failures
        /// (out of memory, driver errors); a kernel given invalid shapes may panic.
        ///
        /// The trait is object safe; the runtime holds an `Arc<dyn Backend>`. Its
        /// kernel methods are declared in the kernel table (`kernels.rs`), which
        /// also generates the recorded [`Op`], the capture
        /// [`Recorder`]($crate::capture::Recorder) and [`Unfused`]($crate::Unfused).
        pub trait Backend: Send + Sync + std::fmt::Debug {
            /// Which kind of device this is.
            fn kind(&self) -> $crate::DeviceKind;
            /// A snapshot of the counters.
            fn counters(&self) -> $crate::Counters;
            /// Resets every counter to zero.
            fn reset_counters(&self);
            /// The names of the operations that ran on the CPU because this device
            /// has no kernel for them (each name once) since the last call; the
            /// runtime reports them as W0503 (the `cpu_fallbacks` counter counts
            /// every fallback). The CPU itself never falls back.
            fn take_fallbacks(&self) -> Vec<&'static str> {
                Vec::new()
            }
            /// This backend's compiled form of a captured step, or `None` (the
            /// default) when it has none and the step is replayed call by call
            /// ([`BackendReplay`]($crate::capture::BackendReplay)).
            fn compile_step(
                &self,
                plan: &$crate::capture::StepPlan,
            ) -> Option<$crate::Result<Box<dyn $crate::capture::StepProgram>>> {
                let _ = plan;
                None
            }
            $(
                declare_backend!(@trait_method [$(#[$doc])*] $method ($self) ($($arg: $aty),*) ($ret) [$($default)?]);
            )*
        }

        /// One recorded kernel: a [`Backend`] method and the arguments that are
        /// not tensors, as fields named like the method's parameters. Tensor
        /// arguments are the call's `inputs`, in the order the kernel table lists
        /// them; results are its `outputs`, in the order the method returns them
        /// (an in-place kernel's outputs are its updated tensors).
        #[derive(Clone, Debug, PartialEq)]
        #[allow(missing_docs)]
        pub enum Op {
            $(
                #[doc = concat!("A `", stringify!($method), "` call.")]
                $variant $({ $($field: $fty),* })?,
            )*
            /// Not a kernel: the input's elements viewed with the output's shape (a
            /// reshape done on the host between kernels, which shares the storage).
            View,
        }

        impl Op {
            /// The backend method's name (`"reshape"` for a view).
            pub fn name(&self) -> &'static str {
                match self {
                    $(Op::$variant { .. } => stringify!($method),)*
                    Op::View => "reshape",
                }
            }

            /// How many tensors a call takes.
            pub fn inputs(&self) -> usize {
                match self {
                    $(Op::$variant { .. } => {
                        let names: &[&str] = &[$(stringify!($input)),*];
                        names.len()
                    })*
                    Op::View => 1,
                }
            }

            /// The element count of each output of a call with inputs of shapes
            /// `ins` (the program's buffers are flat), or why the kernel would not
            /// accept them.
            #[allow(unused_variables)]
            pub fn output_sizes(&self, ins: &[&[usize]]) -> std::result::Result<Vec<usize>, String> {
                if ins.len() != self.inputs() {
                    return Err(format!("{} inputs where `{}` takes {}", ins.len(), self.name(), self.inputs()));
                }
                Ok(match self {
                    $(Op::$variant { $($($field),*)? } => {
                        let $ins = ins;
                        $sizes
                    })*
                    Op::View => vec![ins[0].iter().product()],
                })
            }
        }

        /// Makes recorded call `op` again on `b` with the tensors `ins`, as replay
        /// run `run` (0-based), and returns its outputs. A view is not a kernel
        /// and is an error here (the replay reshapes).
        pub fn replay(b: &dyn Backend, op: &Op, ins: Vec<$crate::Tensor>, run: u64) -> $crate::Result<Vec<$crate::Tensor>> {
            let got = ins.len();
            let wrong = |op: &Op| $crate::DeviceError::Backend {
                device: b.kind().name().to_string(),
                message: format!("a recorded `{}` call has {got} inputs, not {}", op.name(), op.inputs()),
            };
            match op {
                $(Op::$variant { $($($field),*)? } => {
                    declare_backend!(@replay $kind b ins run wrong op $method ($($arg),*) [$($($field),*)?] [$($input),*] [$($($out),*)?])
                })*
                Op::View => Err($crate::DeviceError::Backend {
                    device: b.kind().name().to_string(),
                    message: "a view is not a kernel call".into(),
                }),
            }
        }

        impl Backend for $crate::capture::Recorder {
            fn kind(&self) -> $crate::DeviceKind {
                self.inner().kind()
            }
            fn counters(&self) -> $crate::Counters {
                self.inner().counters()
            }
            fn reset_counters(&self) {
                self.inner().reset_counters()
            }
            fn take_fallbacks(&self) -> Vec<&'static str> {
                self.inner().take_fallbacks()
            }
            $(
                declare_backend!(@record $kind $method ($self) ($($arg: $aty),*) ($ret) $variant [$($($field),*)?] [$($input),*] [$($($out),*)?]);
            )*
        }

        impl Backend for $crate::profile::Profiled {
            fn kind(&self) -> $crate::DeviceKind {
                self.inner().kind()
            }
            fn counters(&self) -> $crate::Counters {
                self.inner().counters()
            }
            fn reset_counters(&self) {
                self.inner().reset_counters()
            }
            fn take_fallbacks(&self) -> Vec<&'static str> {
                self.inner().take_fallbacks()
            }
            fn compile_step(
                &self,
                plan: &$crate::capture::StepPlan,
            ) -> Option<$crate::Result<Box<dyn $crate::capture::StepProgram>>> {
                Some($crate::profile::Profiled::compile_step(self, plan))
            }
            $(
                declare_backend!(@profile $method ($self) ($($arg: $aty),*) ($ret) [$($input),*]);
            )*
        }

        /// A device backend that implements the kernels it can: each method
        /// returns `None` (the default) where the device has no implementation,
        /// and [`CpuFallback`]($crate::CpuFallback) then runs the kernel's
        /// composed default on the device when the kernel table gives one, or
        /// else the CPU kernel on host copies of the inputs, moving the results
        /// back with [`PartialBackend::to_device`] and noting the fallback
        /// ([`PartialBackend::fell_back`], reported as W0503). A kernel added to
        /// the table therefore works on such a device before it has its own
        /// implementation. The methods are generated from the kernel table.
        pub trait PartialBackend: Send + Sync + std::fmt::Debug {
            /// Which kind of device this is.
            fn kind(&self) -> $crate::DeviceKind;
            /// A snapshot of the counters.
            fn counters(&self) -> $crate::Counters;
            /// Resets every counter to zero.
            fn reset_counters(&self);
            /// The names of the kernels that fell back to the CPU since the last call.
            fn take_fallbacks(&self) -> Vec<&'static str>;
            /// This device's compiled form of a captured step (see [`Backend::compile_step`]).
            fn compile_step(
                &self,
                plan: &$crate::capture::StepPlan,
            ) -> Option<$crate::Result<Box<dyn $crate::capture::StepProgram>>> {
                let _ = plan;
                None
            }
            /// Notes that `kernel` is about to run on the CPU (counted and named).
            fn fell_back(&self, kernel: &'static str);
            /// Moves a host tensor made by a CPU fallback to this device.
            fn to_device(&self, t: $crate::Tensor) -> $crate::Result<$crate::Tensor>;
            $(
                #[doc = concat!("[`Backend::", stringify!($method), "`] on this device, or `None` where it has no implementation.")]
                #[allow(unused_variables)]
                fn $method(&$self $(, $arg: $aty)*) -> Option<$crate::Result<$ret>> {
                    None
                }
            )*
        }

        impl<D: PartialBackend> Backend for $crate::CpuFallback<D> {
            fn kind(&self) -> $crate::DeviceKind {
                self.0.kind()
            }
            fn counters(&self) -> $crate::Counters {
                self.0.counters()
            }
            fn reset_counters(&self) {
                self.0.reset_counters()
            }
            fn take_fallbacks(&self) -> Vec<&'static str> {
                self.0.take_fallbacks()
            }
            fn compile_step(
                &self,
                plan: &$crate::capture::StepPlan,
            ) -> Option<$crate::Result<Box<dyn $crate::capture::StepProgram>>> {
                self.0.compile_step(plan)
            }
            $(
                fn $method(&$self $(, $arg: $aty)*) -> $crate::Result<$ret> {
                    if let Some(done) = PartialBackend::$method(&$self.0 $(, $arg)*) {
                        return done;
                    }
                    declare_backend!(@fallback $kind $method ($self) ($($arg),*) [$($input),*] [$($($out),*)?] [$($default)?])
                }
            )*
        }

        impl<B: Backend> Backend for $crate::Unfused<B> {
            fn kind(&self) -> $crate::DeviceKind {
                self.0.kind()
            }
            fn counters(&self) -> $crate::Counters {
                self.0.counters()
            }
            fn reset_counters(&self) {
                self.0.reset_counters()
            }
            fn take_fallbacks(&self) -> Vec<&'static str> {
                self.0.take_fallbacks()
            }
            $(
                declare_backend!(@unfused $kind $method ($self) ($($arg: $aty),*) ($ret));
            )*
        }
    };

    // The trait method, declared or with its default body.
    (@trait_method [$(#[$doc:meta])*] $method:ident ($self:ident) ($($arg:ident: $aty:ty),*) ($ret:ty) []) => {
        $(#[$doc])*
        fn $method(&$self $(, $arg: $aty)*) -> $crate::Result<$ret>;
    };
    (@trait_method [$(#[$doc:meta])*] $method:ident ($self:ident) ($($arg:ident: $aty:ty),*) ($ret:ty) [$default:block]) => {
        $(#[$doc])*
        fn $method(&$self $(, $arg: $aty)*) -> $crate::Result<$ret> $default
    };

    // The recorder runs the kernel on its inner backend and records it.
    (@record in_place $method:ident ($self:ident) ($($arg:ident: $aty:ty),*) ($ret:ty) $variant:ident [$($field:ident),*] [$($input:ident),*] [$($out:ident),*]) => {
        fn $method(&$self $(, $arg: $aty)*) -> $crate::Result<$ret> {
            let op = Op::$variant { $($field: $field.to_owned()),* };
            let before: Vec<$crate::Tensor> = vec![$($crate::Tensor::clone(&*$input)),*];
            let result = $self.run_unrecorded(|k| k.$method($($arg),*))?;
            $self.note(op, &before, &[$(&*$out),*]);
            Ok(result)
        }
    };
    (@record $kind:ident $method:ident ($self:ident) ($($arg:ident: $aty:ty),*) ($ret:ty) $variant:ident [$($field:ident),*] [$($input:ident),*] [$($out:ident),*]) => {
        fn $method(&$self $(, $arg: $aty)*) -> $crate::Result<$ret> {
            let op = Op::$variant { $($field: $field.to_owned()),* };
            $self.run(op, &[$($input),*], |k| k.$method($($arg),*), $crate::declare::Outputs::refs)
        }
    };

    // `Profiled` times the call on its inner backend and logs it.
    (@profile $method:ident ($self:ident) ($($arg:ident: $aty:ty),*) ($ret:ty) [$($input:ident),*]) => {
        fn $method(&$self $(, $arg: $aty)*) -> $crate::Result<$ret> {
            let inputs: Vec<Vec<usize>> = vec![$($input.shape().to_vec()),*];
            let began = $crate::clock::Instant::now();
            let result = $self.inner().$method($($arg),*);
            $self.note(stringify!($method), inputs, began);
            result
        }
    };

    // `CpuFallback`: a kernel the device lacks runs its composed default when
    // the table gives one, else on the CPU.
    (@fallback $kind:ident $method:ident ($self:ident) ($($arg:ident),*) [$($input:ident),*] [$($out:ident),*] [$default:block]) => {
        $default
    };
    (@fallback in_place $method:ident ($self:ident) ($($arg:ident),*) [$($input:ident),*] [$($out:ident),*] []) => {{
        $self.0.fell_back(stringify!($method));
        let mut hosts: Vec<$crate::Tensor> = vec![$($crate::declare::host_copy(&*$input)),*];
        let slots: Vec<&mut $crate::Tensor> = vec![$($out),*];
        let [$($input),*] = &mut hosts[..] else {
            unreachable!("one host copy per input")
        };
        $crate::cpu().$method($($arg),*)?;
        let updated: Vec<$crate::Tensor> = vec![$($out.clone()),*];
        for (slot, t) in slots.into_iter().zip(updated) {
            *slot = $self.0.to_device(t)?;
        }
        Ok(())
    }};
    (@fallback $kind:ident $method:ident ($self:ident) ($($arg:ident),*) [$($input:ident),*] [$($out:ident),*] []) => {{
        $self.0.fell_back(stringify!($method));
        let hosts: Vec<$crate::Tensor> = vec![$($crate::declare::host_copy($input)),*];
        let [$($input),*] = &hosts[..] else {
            unreachable!("one host copy per input")
        };
        let out = $crate::cpu().$method($($arg),*)?;
        $crate::declare::Outputs::try_map(out, &mut |t| $self.0.to_device(t))
    }};

    // `Unfused` forwards primitives and leaves fused kernels to the default.
    (@unfused fused $method:ident ($self:ident) ($($arg:ident: $aty:ty),*) ($ret:ty)) => {};
    (@unfused $kind:ident $method:ident ($self:ident) ($($arg:ident: $aty:ty),*) ($ret:ty)) => {
        fn $method(&$self $(, $arg: $aty)*) -> $crate::Result<$ret> {
            $self.0.$method($($arg),*)
        }
    };

    // A replayed call: the recorded attributes and this run's tensors.
    (@replay in_place $b:ident $ins:ident $run:ident $wrong:ident $op:ident $method:ident ($($arg:ident),*) [$($field:ident),*] [$($input:ident),*] [$($out:ident),*]) => {{
        let mut owned = $ins;
        let [$($input),*] = &mut owned[..] else {
            return Err($wrong($op));
        };
        $(let $field = $crate::declare::Attr::replayed($field, $run);)*
        $b.$method($($arg),*)?;
        Ok(vec![$($out.clone()),*])
    }};
    (@replay $kind:ident $b:ident $ins:ident $run:ident $wrong:ident $op:ident $method:ident ($($arg:ident),*) [$($field:ident),*] [$($input:ident),*] [$($out:ident),*]) => {{
        let [$($input),*] = &$ins[..] else {
            return Err($wrong($op));
        };
        $(let $field = $crate::declare::Attr::replayed($field, $run);)*
        Ok($crate::declare::Outputs::into_tensors($b.$method($($arg),*)?))
    }};
}
