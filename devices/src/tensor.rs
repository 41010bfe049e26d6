//! [`Tensor`]: a dense row-major f32 array and where its data lives.

use std::any::Any;
use std::fmt;
use std::sync::{Arc, OnceLock, Weak};

/// Where a tensor's elements live.
#[derive(Clone, Debug)]
pub enum Storage {
    /// Row-major elements in host memory, shared between clones (copy-on-write).
    Host(Arc<Vec<f32>>),
    /// Row-major elements in a device's memory (a GPU backend's buffer), shared
    /// between clones.
    Device(Arc<DeviceData>),
}

/// Device memory holding a tensor's elements, implemented by GPU backends.
pub trait DeviceBuffer: Send + Sync + fmt::Debug {
    /// The device's name, e.g. `"cuda:0"`.
    fn device(&self) -> String;
    /// The number of f32 elements.
    fn len(&self) -> usize;
    /// Whether the buffer holds no elements.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Copies the elements to host memory; the owning backend counts the download.
    fn to_host(&self) -> crate::Result<Vec<f32>>;
    /// The concrete buffer, for the backend that made it.
    fn as_any(&self) -> &dyn Any;
}

/// A device buffer and, once some host code has read it, a host copy of it.
///
/// Host code may read a device tensor through [`Tensor::host`]: the elements are
/// downloaded once (counted by the owning backend) and kept beside the buffer.
#[derive(Debug)]
pub struct DeviceData {
    buffer: Box<dyn DeviceBuffer>,
    host: OnceLock<Vec<f32>>,
}

impl DeviceData {
    /// The device buffer.
    pub fn buffer(&self) -> &dyn DeviceBuffer {
        self.buffer.as_ref()
    }

    /// The host copy, downloading it on first use.
    ///
    /// Panics when the download fails (a driver failure, not an input error; a
    /// session catches it and survives).
    fn host(&self) -> &[f32] {
        self.host.get_or_init(|| {
            self.buffer
                .to_host()
                .unwrap_or_else(|e| panic!("reading a device tensor on the host failed: {e}"))
        })
    }
}

/// Dense row-major f32 tensor. Cloning is cheap (storage is shared, copy-on-write).
#[derive(Clone, Debug)]
pub struct Tensor {
    shape: Vec<usize>,
    storage: Storage,
}

/// The number of elements of an array of shape `shape` (1 for `[]`).
pub fn numel_of(shape: &[usize]) -> usize {
    shape.iter().product()
}

impl Tensor {
    /// A tensor of shape `shape` holding `data` in row-major order.
    ///
    /// Panics if `data.len()` is not the product of `shape`.
    pub fn from_vec(shape: Vec<usize>, data: Vec<f32>) -> Tensor {
        assert_eq!(
            data.len(),
            numel_of(&shape),
            "Tensor::from_vec: {} elements for shape {:?}",
            data.len(),
            shape
        );
        Tensor {
            shape,
            storage: Storage::Host(Arc::new(data)),
        }
    }

    /// A tensor of shape `shape` sharing already-allocated host data.
    ///
    /// Panics if `data.len()` is not the product of `shape`.
    pub fn from_arc(shape: Vec<usize>, data: Arc<Vec<f32>>) -> Tensor {
        assert_eq!(
            data.len(),
            numel_of(&shape),
            "Tensor::from_arc: {} elements for shape {:?}",
            data.len(),
            shape
        );
        Tensor {
            shape,
            storage: Storage::Host(data),
        }
    }

    /// A tensor of shape `shape` whose elements live in device memory.
    ///
    /// Panics if `buffer.len()` is not the product of `shape`.
    pub fn from_device(shape: Vec<usize>, buffer: Box<dyn DeviceBuffer>) -> Tensor {
        assert_eq!(
            buffer.len(),
            numel_of(&shape),
            "Tensor::from_device: {} elements for shape {:?}",
            buffer.len(),
            shape
        );
        Tensor {
            shape,
            storage: Storage::Device(Arc::new(DeviceData {
                buffer,
                host: OnceLock::new(),
            })),
        }
    }

    /// The device buffer, when the elements live in device memory.
    pub fn device_buffer(&self) -> Option<&dyn DeviceBuffer> {
        match &self.storage {
            Storage::Host(_) => None,
            Storage::Device(d) => Some(d.buffer()),
        }
    }

    /// A rank-0 tensor (shape `[]`) holding `v`.
    pub fn scalar(v: f32) -> Tensor {
        Tensor::from_vec(vec![], vec![v])
    }

    /// A tensor of shape `shape` filled with zeros.
    pub fn zeros(shape: Vec<usize>) -> Tensor {
        Tensor::full(shape, 0.0)
    }

    /// A tensor of shape `shape` with every element `v`.
    pub fn full(shape: Vec<usize>, v: f32) -> Tensor {
        let n = numel_of(&shape);
        Tensor::from_vec(shape, vec![v; n])
    }

    /// The size of each axis.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The number of axes.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The number of elements (1 for a scalar, 0 when any axis is 0).
    pub fn numel(&self) -> usize {
        numel_of(&self.shape)
    }

    /// Where the data lives.
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// Whether the data is in host memory.
    pub fn is_host(&self) -> bool {
        matches!(self.storage, Storage::Host(_))
    }

    /// The elements in row-major order. A device tensor is downloaded on first
    /// use (counted by its backend) and the host copy is kept.
    pub fn host(&self) -> &[f32] {
        crate::host_reads::note(self.storage_key());
        match &self.storage {
            Storage::Host(v) => v.as_slice(),
            Storage::Device(d) => d.host(),
        }
    }

    /// Mutable access to the elements; copies them first when the storage is shared
    /// with another tensor (`Arc::make_mut`). A device tensor becomes a host tensor.
    pub fn host_mut(&mut self) -> &mut [f32] {
        if let Storage::Device(d) = &self.storage {
            self.storage = Storage::Host(Arc::new(d.host().to_vec()));
        }
        match &mut self.storage {
            Storage::Host(v) => Arc::make_mut(v).as_mut_slice(),
            Storage::Device(_) => unreachable!("converted to host storage above"),
        }
    }

    /// A copy of the elements in row-major order.
    pub fn to_vec(&self) -> Vec<f32> {
        self.host().to_vec()
    }

    /// The elements in row-major order, without copying when this tensor is the
    /// only owner of its storage.
    pub fn into_vec(self) -> Vec<f32> {
        crate::host_reads::note(self.storage_key());
        match self.storage {
            Storage::Host(v) => Arc::try_unwrap(v).unwrap_or_else(|shared| (*shared).clone()),
            Storage::Device(d) => d.host().to_vec(),
        }
    }

    /// The same elements viewed with another shape (shares the storage).
    ///
    /// Panics if the element counts differ.
    pub fn reshape(&self, shape: Vec<usize>) -> Tensor {
        assert_eq!(
            numel_of(&shape),
            self.numel(),
            "Tensor::reshape: {:?} to {:?}",
            self.shape,
            shape
        );
        Tensor {
            shape,
            storage: self.storage.clone(),
        }
    }

    /// An identity of the storage: equal for tensors that share it, distinct
    /// for storages alive at the same time.
    pub(crate) fn storage_key(&self) -> usize {
        match &self.storage {
            Storage::Host(a) => Arc::as_ptr(a) as usize,
            Storage::Device(d) => Arc::as_ptr(d) as usize,
        }
    }

    /// Whether two tensors share the same storage (no copy between them).
    pub fn shares_storage(&self, other: &Tensor) -> bool {
        match (&self.storage, &other.storage) {
            (Storage::Host(a), Storage::Host(b)) => Arc::ptr_eq(a, b),
            (Storage::Device(a), Storage::Device(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// A handle that names this tensor's storage without keeping its elements
    /// alive (see [`WeakTensor`]).
    pub fn downgrade(&self) -> WeakTensor {
        WeakTensor {
            shape: self.shape.clone(),
            storage: match &self.storage {
                Storage::Host(a) => WeakStorage::Host(Arc::downgrade(a)),
                Storage::Device(d) => WeakStorage::Device(Arc::downgrade(d)),
            },
        }
    }
}

/// A tensor's shape and a weak handle on its storage: it tells the storage
/// apart from every other (no storage can take its address while the handle
/// lives) but does not keep the elements alive. Step capture names the values
/// of a recorded step with these, so recording frees each value when the step
/// drops it, as eager evaluation does.
#[derive(Clone, Debug)]
pub struct WeakTensor {
    shape: Vec<usize>,
    storage: WeakStorage,
}

#[derive(Clone, Debug)]
enum WeakStorage {
    Host(Weak<Vec<f32>>),
    Device(Weak<DeviceData>),
}

impl WeakTensor {
    /// The tensor's shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        numel_of(&self.shape)
    }

    /// The tensor, while some tensor still holds its storage.
    pub fn upgrade(&self) -> Option<Tensor> {
        let storage = match &self.storage {
            WeakStorage::Host(w) => Storage::Host(w.upgrade()?),
            WeakStorage::Device(w) => Storage::Device(w.upgrade()?),
        };
        Some(Tensor {
            shape: self.shape.clone(),
            storage,
        })
    }

    /// Whether some tensor still holds the storage.
    pub fn is_alive(&self) -> bool {
        match &self.storage {
            WeakStorage::Host(w) => w.strong_count() > 0,
            WeakStorage::Device(w) => w.strong_count() > 0,
        }
    }

    /// Whether `t` uses this storage.
    pub fn shares_storage(&self, t: &Tensor) -> bool {
        self.storage_key() == t.storage_key()
    }

    /// The storage's identity, as [`Tensor::storage_key`] gives it.
    pub(crate) fn storage_key(&self) -> usize {
        match &self.storage {
            WeakStorage::Host(w) => w.as_ptr() as usize,
            WeakStorage::Device(w) => w.as_ptr() as usize,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_and_accessors() {
        let t = Tensor::from_vec(vec![2, 3], vec![1., 2., 3., 4., 5., 6.]);
        assert_eq!(t.shape(), &[2, 3]);
        assert_eq!(t.rank(), 2);
        assert_eq!(t.numel(), 6);
        assert_eq!(t.to_vec(), vec![1., 2., 3., 4., 5., 6.]);
        let s = Tensor::scalar(7.0);
        assert_eq!(s.shape(), &[] as &[usize]);
        assert_eq!(s.numel(), 1);
        assert_eq!(s.host(), &[7.0]);
        assert_eq!(Tensor::zeros(vec![2, 0]).numel(), 0);
        assert_eq!(Tensor::full(vec![3], 2.5).to_vec(), vec![2.5; 3]);
        assert!(t.is_host());
    }

    #[test]
    #[should_panic]
    fn from_vec_checks_length() {
        Tensor::from_vec(vec![2, 2], vec![1.0; 3]);
    }

    #[test]
    fn reshape_shares_and_host_mut_copies_on_write() {
        let a = Tensor::from_vec(vec![2, 2], vec![1., 2., 3., 4.]);
        let mut b = a.reshape(vec![4]);
        assert!(a.shares_storage(&b));
        b.host_mut()[0] = 9.0;
        assert!(!a.shares_storage(&b));
        assert_eq!(a.host()[0], 1.0);
        assert_eq!(b.host()[0], 9.0);
        let c = b.clone();
        drop(b);
        assert_eq!(c.into_vec(), vec![9., 2., 3., 4.]);
    }

    #[test]
    #[should_panic]
    fn reshape_checks_numel() {
        Tensor::zeros(vec![2, 3]).reshape(vec![4]);
    }
}
