//! [`CpuFallback`]: the [`Backend`] of a device that implements only some
//! kernels ([`PartialBackend`]), handing the others to the CPU, counted and
//! named (never silently).

#[allow(unused_imports)] // for the docs
use crate::kernels::{Backend, PartialBackend};

/// The [`Backend`] of a [`PartialBackend`] device: every kernel the device
/// implements runs there; one it lacks runs its composed default on the device
/// when the kernel table gives one, else on the CPU on host copies of its
/// inputs (downloads, counted by the device), with the results moved back
/// (uploads) and the fallback noted, so the runtime reports it as W0503. Its
/// methods are generated from the kernel table (`kernels.rs`).
#[derive(Debug, Default)]
pub struct CpuFallback<D>(pub D);

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Mutex;

    use super::CpuFallback;
    use crate::backend::{AdamStep, Backend, BinaryOp, Counters, DeviceKind, UnaryOp};
    use crate::kernels::PartialBackend;
    use crate::tensor::Tensor;

    /// A device that implements no kernel at all: everything falls back.
    #[derive(Debug, Default)]
    struct NoKernels {
        fallbacks: AtomicU64,
        names: Mutex<Vec<&'static str>>,
        moved: AtomicU64,
    }

    impl PartialBackend for NoKernels {
        fn kind(&self) -> DeviceKind {
            DeviceKind::Mlx
        }
        fn counters(&self) -> Counters {
            Counters {
                cpu_fallbacks: self.fallbacks.load(Ordering::Relaxed),
                uploads: self.moved.load(Ordering::Relaxed),
                ..Counters::default()
            }
        }
        fn reset_counters(&self) {}
        fn take_fallbacks(&self) -> Vec<&'static str> {
            std::mem::take(&mut *self.names.lock().unwrap())
        }
        fn fell_back(&self, kernel: &'static str) {
            self.fallbacks.fetch_add(1, Ordering::Relaxed);
            let mut names = self.names.lock().unwrap();
            if !names.contains(&kernel) {
                names.push(kernel);
            }
        }
        fn to_device(&self, t: Tensor) -> crate::Result<Tensor> {
            self.moved.fetch_add(1, Ordering::Relaxed);
            Ok(t)
        }
    }

    fn t(shape: &[usize], base: f32) -> Tensor {
        let n = shape.iter().product();
        Tensor::from_vec(
            shape.to_vec(),
            (0..n).map(|i| base + i as f32 * 0.25).collect(),
        )
    }

    #[test]
    fn missing_kernels_run_on_the_cpu_counted_and_named() {
        let dev = CpuFallback(NoKernels::default());
        let cpu = crate::cpu();
        let (a, b) = (t(&[2, 3], 1.0), t(&[3], -0.5));
        assert_eq!(
            dev.binary(BinaryOp::Mul, &a, &b).unwrap().host(),
            cpu.binary(BinaryOp::Mul, &a, &b).unwrap().host()
        );
        assert_eq!(dev.counters().cpu_fallbacks, 1);
        assert_eq!(
            dev.counters().uploads,
            1,
            "the result is moved to the device"
        );
        let (y, inv) = dev.rms_norm(&a, 1e-5).unwrap();
        let (yc, invc) = cpu.rms_norm(&a, 1e-5).unwrap();
        assert_eq!((y.host(), inv.host()), (yc.host(), invc.host()));
        assert_eq!(dev.counters().uploads, 3, "one move per output");
        assert_eq!(dev.take_fallbacks(), vec!["binary", "rms_norm"]);
        assert!(dev.take_fallbacks().is_empty());
    }

    #[test]
    fn kernels_with_a_composed_default_run_it_on_the_device() {
        let dev = CpuFallback(NoKernels::default());
        let (x, bias) = (t(&[2, 3], -1.0), t(&[3], 0.5));
        let got = dev.bias_act(&x, &bias, UnaryOp::Relu).unwrap();
        let want = crate::cpu().bias_act(&x, &bias, UnaryOp::Relu).unwrap();
        assert_eq!(got.host(), want.host());
        // The composed default is `binary` then `unary`, each a fallback.
        assert_eq!(dev.take_fallbacks(), vec!["binary", "unary"]);
        // `dropout_mask`'s default is "no device mask": no fallback at all.
        let key = crate::DropoutKey {
            stream: 1,
            counter: 0,
        };
        assert!(dev.dropout_mask(&[4], key, 0.5).unwrap().is_none());
        assert!(dev.take_fallbacks().is_empty());
    }

    #[test]
    fn in_place_kernels_update_their_tensors_through_the_fallback() {
        let dev = CpuFallback(NoKernels::default());
        let step = AdamStep {
            lr: 0.1,
            b1: 0.9,
            b2: 0.999,
            eps: 1e-8,
            wd: 0.0,
            t: 1,
        };
        let g = t(&[4], 0.5);
        let (mut p, mut m, mut v) = (t(&[4], 1.0), Tensor::zeros(vec![4]), Tensor::zeros(vec![4]));
        let (mut pc, mut mc, mut vc) = (p.clone(), m.clone(), v.clone());
        let before = p.clone();
        dev.adam_update(&mut p, &g, &mut m, &mut v, step).unwrap();
        crate::cpu()
            .adam_update(&mut pc, &g, &mut mc, &mut vc, step)
            .unwrap();
        assert_eq!(
            (p.host(), m.host(), v.host()),
            (pc.host(), mc.host(), vc.host())
        );
        assert_ne!(p.host(), before.host(), "the parameter moved");
        assert_eq!(
            before.host(),
            t(&[4], 1.0).host(),
            "a clone taken before keeps its values"
        );
        assert_eq!(dev.take_fallbacks(), vec!["adam_update"]);
        assert_eq!(dev.counters().uploads, 3, "p, m and v moved back");
    }
}
