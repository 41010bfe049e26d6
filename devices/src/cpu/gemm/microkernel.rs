//! The GEMM micro-kernels: one `MR × NR` tile of C from `kc` columns of `MR`
//! rows of A and `kc` rows of `NR` columns of B, each read through strides
//! ([`Operands`]): from packed panels (A's element `(r, p)` at `p·MR + r`, B's
//! `(p, j)` at `p·NR + j`) or straight from the matrices for small products.
//!
//! The order of operations is the contract every kernel keeps, whatever its
//! width: each element of the tile is its own accumulator, starting at +0.0 and
//! updated once per `p`, in increasing `p`, by one fused multiply-add
//! `acc = a·b + acc` (rounded once). The tile is then stored, or added to C with
//! one rounded addition (`c + acc`). A SIMD lane holds one element, so the width
//! of the registers (scalar, 8 or 16 lanes) never changes a result.

use super::super::isa::Isa;

/// Where a tile's operands are: A's element `(r, p)` at `a[r·ars + p·acs]`
/// (`r < MR`, `p < kc`), B's element `(p, j)` at `b[p·brs + j]` (`j < NR`).
#[derive(Clone, Copy)]
pub(super) struct Operands {
    pub(super) a: *const f32,
    pub(super) ars: usize,
    pub(super) acs: usize,
    pub(super) b: *const f32,
    pub(super) brs: usize,
}

/// Computes one tile: `kernel(kc, operands, c, ldc, rows, cols, accumulate)`
/// takes `kc` steps over the operands into the `rows × cols` corner (`rows ≤
/// MR`, `cols ≤ NR`) of the tile of C at `c` (row stride `ldc`), stored when
/// `accumulate` is false, added to C otherwise.
///
/// # Safety
/// Every element of A and B named in [`Operands`] is readable; `c` points to a
/// `rows × cols` block with row stride `ldc` that nothing else accesses
/// meanwhile; the CPU supports the kernel's [`Isa`].
pub(super) type KernelFn = unsafe fn(usize, Operands, *mut f32, usize, usize, usize, bool);

/// A micro-kernel and its tile size.
#[derive(Clone, Copy)]
pub(super) struct Microkernel {
    /// Rows of a tile (of C and of a packed A panel).
    pub(super) mr: usize,
    /// Columns of a tile (of C and of a packed B panel).
    pub(super) nr: usize,
    /// The kernel.
    pub(super) run: KernelFn,
    /// Its instruction-set level (the matrix-vector kernels of `vector.rs`
    /// take the same).
    pub(super) isa: Isa,
}

impl Microkernel {
    /// The kernel of `isa` (the caller checked that the CPU supports it).
    pub(super) fn of(isa: Isa) -> Microkernel {
        match isa {
            Isa::Scalar => Microkernel {
                mr: scalar::MR,
                nr: scalar::NR,
                run: scalar::kernel(),
                isa,
            },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => Microkernel {
                mr: avx2::MR,
                nr: avx2::NR,
                run: avx2::kernel,
                isa,
            },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => Microkernel {
                mr: avx512::MR,
                nr: avx512::NR,
                run: avx512::kernel,
                isa,
            },
            #[cfg(not(target_arch = "x86_64"))]
            _ => Microkernel::of(Isa::Scalar),
        }
    }
}

impl Microkernel {
    /// The kernel for a product with `m` rows of C at `isa`: the level's
    /// kernel ([`Microkernel::of`]), or its kernel of shorter tiles (8 × 32 at
    /// AVX-512, 4 × 16 at AVX2) when `m` is at most [`short_rows_up_to`] and
    /// the short tiles cover it with fewer padded rows. The level's kernel
    /// then computes a partial last tile (32 rows: 12 + 12 + 8), packed and
    /// stored through a scratch tile; the short one covers it exactly.
    /// Measured on a 2-core AVX-512 Xeon, one thread, best of 3 interleaved:
    /// at AVX-512 `[32, 256]·[256, 32]` 1.50×, `[32, 32]·[32, 256]` 1.44×,
    /// `[128, 256]·[256, 256]` 1.10×, 512³ 1.15× (two threads); at AVX2
    /// (forced) 1.14–1.16× at 32 rows, but 0.88× at 512³, hence its lower
    /// limit. At 128 rows AVX2's 6 × 16 tiles (132 rows, 4 of them padding)
    /// beat its 4 × 16 ones on an AVX-512 AMD EPYC (Zen 5) limited to AVX2,
    /// one thread, best of 3 interleaved: `[128, 2048]·[2048, 512]` (A read
    /// transposed) 1.09×, `[128, 2048]·[2048, 128]` 1.08×, 128³ 1.03×; at 64
    /// rows they were even, hence the limit of 64 there.
    pub(super) fn for_rows(isa: Isa, m: usize) -> Microkernel {
        let main = Microkernel::of(isa);
        let padded = |k: &Microkernel| m.div_ceil(k.mr) * k.mr;
        match Microkernel::short_of(isa) {
            Some(short) if m <= short_rows_up_to(isa) && padded(&short) < padded(&main) => short,
            _ => main,
        }
    }

    /// The kernel of shorter tiles at `isa` (see [`Microkernel::for_rows`]),
    /// if the level has one.
    fn short_of(isa: Isa) -> Option<Microkernel> {
        match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => Some(Microkernel {
                mr: avx512_short::MR,
                nr: avx512_short::NR,
                run: avx512_short::kernel,
                isa,
            }),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => Some(Microkernel {
                mr: avx2_short::MR,
                nr: avx2_short::NR,
                run: avx2_short::kernel,
                isa,
            }),
            _ => None,
        }
    }
}

/// Rows of C up to which [`Microkernel::for_rows`] may pick short tiles at
/// `isa`.
pub(super) fn short_rows_up_to(isa: Isa) -> usize {
    match isa {
        Isa::Avx512 => 512,
        _ => 64,
    }
}

/// Writes the `rows × cols` corner of `tile` (row stride `nr`) to C at `c`:
/// `c = t`, or `c = c + t` when `accumulate` is set.
///
/// # Safety
/// As [`KernelFn`] for `c`.
#[inline(always)]
unsafe fn finish_partial(
    tile: &[f32],
    nr: usize,
    c: *mut f32,
    ldc: usize,
    rows: usize,
    cols: usize,
    accumulate: bool,
) {
    for r in 0..rows {
        for j in 0..cols {
            let t = tile[r * nr + j];
            let d = c.add(r * ldc + j);
            *d = if accumulate { *d + t } else { t };
        }
    }
}

/// The portable kernel: an exact fused multiply-add on every CPU
/// (`math::fma_f32`: one instruction where the CPU has FMA, a library routine
/// where it does not, f64 arithmetic on wasm32: the same result every way).
mod scalar {
    pub(super) const MR: usize = 4;
    pub(super) const NR: usize = 8;

    /// The kernel: compiled for FMA when the CPU has it.
    pub(super) fn kernel() -> super::KernelFn {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("fma") {
            return with_fma;
        }
        portable
    }

    /// `name`: the kernel compiled with the target features `features`
    /// (none: the build's baseline).
    macro_rules! instance {
        ($name:ident $(, $features:literal)?) => {
            /// # Safety
            /// See [`super::KernelFn`]; the CPU has the features named.
            #[allow(clippy::too_many_arguments)]
            $(#[target_feature(enable = $features)])?
            unsafe fn $name(
                kc: usize,
                x: super::Operands,
                c: *mut f32,
                ldc: usize,
                rows: usize,
                cols: usize,
                accumulate: bool,
            ) {
                let mut acc = [[0.0f32; NR]; MR];
                for p in 0..kc {
                    let (ap, bp) = (x.a.add(p * x.acs), x.b.add(p * x.brs));
                    for (r, row) in acc.iter_mut().enumerate() {
                        let av = *ap.add(r * x.ars);
                        for (j, v) in row.iter_mut().enumerate() {
                            *v = crate::math::fma_f32(av, *bp.add(j), *v);
                        }
                    }
                }
                super::finish_partial(acc.as_flattened(), NR, c, ldc, rows, cols, accumulate);
            }
        };
    }
    instance!(portable);
    #[cfg(target_arch = "x86_64")]
    instance!(with_fma, "fma");
}

/// A SIMD kernel with `MR` rows of `NV` vectors of `LANES` floats: the A value
/// of each row is broadcast and multiplied into the row's vectors of B.
#[cfg(target_arch = "x86_64")]
macro_rules! simd_kernel {
    (
        feature: $feature:literal,
        vector: $vec:ty,
        lanes: $lanes:literal,
        rows: $mr:literal,
        vectors: $nv:literal,
        zero: $zero:ident,
        splat: $splat:ident,
        load: $load:ident,
        store: $store:ident,
        fmadd: $fmadd:ident,
        add: $add:ident $(,)?
    ) => {
        use std::arch::x86_64::*;

        pub(super) const MR: usize = $mr;
        const NV: usize = $nv;
        pub(super) const NR: usize = NV * $lanes;

        /// # Safety
        /// See [`super::KernelFn`].
        #[allow(clippy::too_many_arguments)]
        #[target_feature(enable = $feature)]
        pub(super) unsafe fn kernel(
            kc: usize,
            x: super::Operands,
            c: *mut f32,
            ldc: usize,
            rows: usize,
            cols: usize,
            accumulate: bool,
        ) {
            // A tile of one vector's columns or fewer (the last panel of a
            // product whose columns are not a multiple of `NR`, such as 280
            // = 17 × 16 + 8) takes only the vectors it needs, not the
            // padding's multiply-adds.
            if cols <= $lanes {
                tile::<1>(kc, x, c, ldc, rows, cols, accumulate)
            } else {
                tile::<NV>(kc, x, c, ldc, rows, cols, accumulate)
            }
        }

        /// The tile's first `V` vectors of columns (`cols ≤ V · LANES`).
        ///
        /// # Safety
        /// See [`super::KernelFn`].
        #[allow(clippy::too_many_arguments)]
        #[target_feature(enable = $feature)]
        unsafe fn tile<const V: usize>(
            kc: usize,
            x: super::Operands,
            c: *mut f32,
            ldc: usize,
            rows: usize,
            cols: usize,
            accumulate: bool,
        ) {
            const { assert!(V <= NV) };
            // Fetch the tile of C now (`prefetchw` where the build's target
            // has it, else `prefetcht0`): its lines arrive while the loop runs
            // instead of stalling the store (or the addition) after it.
            for r in 0..rows {
                let row = c.wrapping_add(r * ldc);
                _mm_prefetch::<_MM_HINT_ET0>(row.cast::<i8>());
                _mm_prefetch::<_MM_HINT_ET0>(row.wrapping_add(cols - 1).cast::<i8>());
            }
            let mut acc: [[$vec; V]; MR] = [[$zero(); V]; MR];
            // One step `p`: row `r`'s A value is at `a_at(r)`.
            macro_rules! step {
                ($p:expr, $a_at:expr) => {{
                    let bp = x.b.add($p * x.brs);
                    let mut bv: [$vec; V] = [$zero(); V];
                    for (v, y) in bv.iter_mut().enumerate() {
                        *y = $load(bp.add(v * $lanes));
                    }
                    for (r, row) in acc.iter_mut().enumerate() {
                        let av = $splat(*$a_at(r));
                        for (y, &by) in row.iter_mut().zip(&bv) {
                            *y = $fmadd(av, by, *y);
                        }
                    }
                }};
            }
            if x.ars == 1 && x.acs == MR {
                // A packed: its rows at fixed offsets, the steps unrolled by
                // 4 (still one step after the other, in increasing `p`).
                let quads = kc / 4 * 4;
                for p0 in (0..quads).step_by(4) {
                    for p in p0..p0 + 4 {
                        let ap = x.a.add(p * MR);
                        step!(p, |r| ap.add(r));
                    }
                }
                for p in quads..kc {
                    let ap = x.a.add(p * MR);
                    step!(p, |r| ap.add(r));
                }
            } else {
                for p in 0..kc {
                    let ap = x.a.add(p * x.acs);
                    step!(p, |r| ap.add(r * x.ars));
                }
            }
            if rows == MR && cols == V * $lanes {
                for (r, row) in acc.iter().enumerate() {
                    for (v, &x) in row.iter().enumerate() {
                        let d = c.add(r * ldc + v * $lanes);
                        let x = if accumulate { $add($load(d), x) } else { x };
                        $store(d, x);
                    }
                }
            } else {
                let mut tile = [0.0f32; MR * NR];
                for (r, row) in acc.iter().enumerate() {
                    for (v, &x) in row.iter().enumerate() {
                        $store(tile.as_mut_ptr().add(r * NR + v * $lanes), x);
                    }
                }
                super::finish_partial(&tile, NR, c, ldc, rows, cols, accumulate);
            }
        }
    };
}

/// An AVX2 kernel of `rows` × 16 tiles.
#[cfg(target_arch = "x86_64")]
macro_rules! avx2_kernel {
    ($rows:literal) => {
        simd_kernel! {
            feature: "avx2,fma",
            vector: __m256,
            lanes: 8,
            rows: $rows,
            vectors: 2,
            zero: _mm256_setzero_ps,
            splat: _mm256_set1_ps,
            load: _mm256_loadu_ps,
            store: _mm256_storeu_ps,
            fmadd: _mm256_fmadd_ps,
            add: _mm256_add_ps,
        }
    };
}

/// An AVX-512 kernel of `rows` × 32 tiles.
#[cfg(target_arch = "x86_64")]
macro_rules! avx512_kernel {
    ($rows:literal) => {
        simd_kernel! {
            feature: "avx512f,fma",
            vector: __m512,
            lanes: 16,
            rows: $rows,
            vectors: 2,
            zero: _mm512_setzero_ps,
            splat: _mm512_set1_ps,
            load: _mm512_loadu_ps,
            store: _mm512_storeu_ps,
            fmadd: _mm512_fmadd_ps,
            add: _mm512_add_ps,
        }
    };
}

/// 6 × 16 tiles in 12 of the 16 ymm registers.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    avx2_kernel!(6);
}

/// 12 × 32 tiles in 24 of the 32 zmm registers.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    avx512_kernel!(12);
}

/// 8 × 32 tiles in 16 zmm registers: for products of few rows (see
/// [`Microkernel::for_rows`]).
#[cfg(target_arch = "x86_64")]
mod avx512_short {
    avx512_kernel!(8);
}

/// 4 × 16 tiles in 8 ymm registers: for products of few rows (see
/// [`Microkernel::for_rows`]).
#[cfg(target_arch = "x86_64")]
mod avx2_short {
    avx2_kernel!(4);
}
