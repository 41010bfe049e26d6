//! Device-resident tensors as host code sees them (no GPU needed): a stand-in
//! `DeviceBuffer` counts its downloads, and `Tensor` must download once and keep
//! the copy, share storage between clones, and turn into host storage on write.

use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use mlpl_devices::{cpu, DeviceBuffer, Tensor, UnaryOp};

#[derive(Debug)]
struct FakeBuffer {
    data: Vec<f32>,
    downloads: Arc<AtomicUsize>,
}

impl DeviceBuffer for FakeBuffer {
    fn device(&self) -> String {
        "fake:0".to_string()
    }

    fn len(&self) -> usize {
        self.data.len()
    }

    fn to_host(&self) -> mlpl_devices::Result<Vec<f32>> {
        self.downloads.fetch_add(1, Ordering::SeqCst);
        Ok(self.data.clone())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn device_tensor(shape: Vec<usize>, data: Vec<f32>) -> (Tensor, Arc<AtomicUsize>) {
    let downloads = Arc::new(AtomicUsize::new(0));
    let buf = FakeBuffer {
        data,
        downloads: downloads.clone(),
    };
    (Tensor::from_device(shape, Box::new(buf)), downloads)
}

#[test]
fn host_reads_download_once_and_keep_the_copy() {
    let (t, downloads) = device_tensor(vec![2, 2], vec![1., 2., 3., 4.]);
    assert!(!t.is_host());
    assert_eq!(t.device_buffer().unwrap().device(), "fake:0");
    assert_eq!(downloads.load(Ordering::SeqCst), 0, "nothing read yet");
    assert_eq!(t.host(), &[1., 2., 3., 4.]);
    let clone = t.clone();
    assert!(clone.shares_storage(&t));
    assert_eq!(clone.reshape(vec![4]).host(), &[1., 2., 3., 4.]);
    assert_eq!(t.to_vec(), vec![1., 2., 3., 4.]);
    assert_eq!(
        downloads.load(Ordering::SeqCst),
        1,
        "one download for every reader"
    );
}

#[test]
fn writing_turns_a_device_tensor_into_a_host_tensor() {
    let (t, downloads) = device_tensor(vec![3], vec![1., 2., 3.]);
    let mut w = t.clone();
    w.host_mut()[0] = 9.0;
    assert!(w.is_host());
    assert!(!w.shares_storage(&t));
    assert_eq!(w.host(), &[9., 2., 3.]);
    assert_eq!(t.host(), &[1., 2., 3.], "the device tensor is unchanged");
    assert_eq!(downloads.load(Ordering::SeqCst), 1);
    assert_eq!(t.into_vec(), vec![1., 2., 3.]);
}

#[test]
fn the_cpu_backend_computes_on_device_tensors_through_their_host_copy() {
    let (t, downloads) = device_tensor(vec![2], vec![-1., 2.]);
    let r = cpu().unary(UnaryOp::Relu, &t).unwrap();
    assert!(r.is_host());
    assert_eq!(r.host(), &[0., 2.]);
    assert_eq!(downloads.load(Ordering::SeqCst), 1);
}

#[test]
fn without_the_feature_or_a_driver_cuda_says_why() {
    match mlpl_devices::cuda::open(0) {
        Ok(b) => assert_eq!(b.kind(), mlpl_devices::DeviceKind::Cuda),
        Err(why) => {
            let text = why.to_string();
            assert!(!text.is_empty());
            if cfg!(not(feature = "cuda")) {
                assert_eq!(why, mlpl_devices::CudaUnavailable::NotBuilt);
                assert!(text.contains("--features mlpl-devices/cuda"), "{text}");
            }
            // The answer is remembered: the same every time.
            assert_eq!(mlpl_devices::cuda::open(0).err(), Some(why));
        }
    }
}
