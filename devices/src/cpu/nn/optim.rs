//! The fused Adam/AdamW update.

use crate::backend::AdamConstants;
use crate::cpu::isa::vectorised;
use crate::cpu::{PAR_CHUNK, PAR_THRESHOLD};
use crate::tensor::Tensor;
use rayon::prelude::*;

/// One fused Adam/AdamW step in place: m = b1·m + (1−b1)·g; v = b2·v + (1−b2)·g²;
/// p −= lr·((m/bc1)/(√(v/bc2) + eps) + wd·p).
pub(crate) fn adam_update(
    p: &mut Tensor,
    g: &Tensor,
    m: &mut Tensor,
    v: &mut Tensor,
    h: AdamConstants,
) {
    let n = p.numel();
    assert!(
        g.numel() == n && m.numel() == n && v.numel() == n,
        "adam_update: p, g, m and v sizes differ"
    );
    adam_update_into(p.host_mut(), g.host(), m.host_mut(), v.host_mut(), h);
}

/// One chunk of [`adam_update_into`]: the update of each element, in place.
#[inline(always)]
fn adam_chunk(ps: &mut [f32], ms: &mut [f32], vs: &mut [f32], gs: &[f32], h: &AdamConstants) {
    let (ib1, ib2) = (1.0 / h.bc1, 1.0 / h.bc2);
    for (((pp, mm), vv), &gg) in ps.iter_mut().zip(ms.iter_mut()).zip(vs.iter_mut()).zip(gs) {
        *mm = h.b1 * *mm + (1.0 - h.b1) * gg;
        *vv = h.b2 * *vv + (1.0 - h.b2) * gg * gg;
        let upd = (*mm * ib1) / ((*vv * ib2).sqrt() + h.eps) + h.wd * *pp;
        *pp -= h.lr * upd;
    }
}

/// [`adam_update`] on slices of one length, in place.
pub(crate) fn adam_update_into(
    ps: &mut [f32],
    gs: &[f32],
    ms: &mut [f32],
    vs: &mut [f32],
    h: AdamConstants,
) {
    let n = ps.len();
    assert!(
        gs.len() == n && ms.len() == n && vs.len() == n,
        "adam_update: p, g, m and v sizes differ"
    );
    let step = |pc: &mut [f32], mc: &mut [f32], vc: &mut [f32], gc: &[f32]| {
        vectorised(
            #[inline(always)]
            || adam_chunk(pc, mc, vc, gc, &h),
        )
    };
    if n >= PAR_THRESHOLD {
        ps.par_chunks_mut(PAR_CHUNK)
            .zip(ms.par_chunks_mut(PAR_CHUNK))
            .zip(vs.par_chunks_mut(PAR_CHUNK))
            .zip(gs.par_chunks(PAR_CHUNK))
            .for_each(|(((pc, mc), vc), gc)| step(pc, mc, vc, gc));
    } else {
        step(ps, ms, vs, gs);
    }
}
