//! [`Tensor`]: a dense row-major f32 array and where its data lives.

use std::sync::Arc;

/// Where a tensor's elements live.
///
/// Only host memory exists today; CUDA and MLX variants come later behind cargo
/// features, and code that needs host data should go through
/// [`Backend::download`](crate::Backend::download) first.
#[derive(Clone, Debug)]
pub enum Storage {
    /// Row-major elements in host memory, shared between clones (copy-on-write).
    Host(Arc<Vec<f32>>),
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

    /// Whether the data is in host memory (always true until device storages exist).
    pub fn is_host(&self) -> bool {
        matches!(self.storage, Storage::Host(_))
    }

    /// The elements in row-major order.
    ///
    /// Panics when the storage is not host memory (only possible once device
    /// storages exist; download first).
    pub fn host(&self) -> &[f32] {
        match &self.storage {
            Storage::Host(v) => v.as_slice(),
        }
    }

    /// Mutable access to the elements; copies them first when the storage is shared
    /// with another tensor (`Arc::make_mut`).
    ///
    /// Panics when the storage is not host memory.
    pub fn host_mut(&mut self) -> &mut [f32] {
        match &mut self.storage {
            Storage::Host(v) => Arc::make_mut(v).as_mut_slice(),
        }
    }

    /// A copy of the elements in row-major order.
    pub fn to_vec(&self) -> Vec<f32> {
        self.host().to_vec()
    }

    /// The elements in row-major order, without copying when this tensor is the
    /// only owner of its storage.
    pub fn into_vec(self) -> Vec<f32> {
        match self.storage {
            Storage::Host(v) => Arc::try_unwrap(v).unwrap_or_else(|shared| (*shared).clone()),
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

    /// Whether two tensors share the same storage (no copy between them).
    pub fn shares_storage(&self, other: &Tensor) -> bool {
        match (&self.storage, &other.storage) {
            (Storage::Host(a), Storage::Host(b)) => Arc::ptr_eq(a, b),
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
