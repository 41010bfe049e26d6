// Softmax family along one axis. The input is viewed as [outer, len, inner]; one
// block per (outer, inner) vector, which is strided by `inner`.

#define VEC_BASE(x, r) ((x) + ((r) / inner) * len * inner + ((r) % inner))

// The maximum `m` of the vector `xr` (len elements, stride `inner`) and the
// float64 sum of exp(x - m) over it, reduced over the block: the shift every
// kernel of this family starts from.
__device__ void vec_max_sumexp(const float* xr, u64 len, u64 inner, float* m_out, double* s_out) {
    float m = -INFINITY;
    for (u64 j = threadIdx.x; j < len; j += blockDim.x) m = nan_max(m, xr[j * inner]);
    m = block_max(m);
    double s = 0.0;
    for (u64 j = threadIdx.x; j < len; j += blockDim.x) s += (double)expf(xr[j * inner] - m);
    *m_out = m;
    *s_out = block_sum(s);
}

extern "C" __global__ void softmax_fwd(const float* x, float* y, u64 outer, u64 len, u64 inner) {
    FOR_EACH_ROW(r, outer * inner) {
        const float* xr = VEC_BASE(x, r);
        float* yr = VEC_BASE(y, r);
        float m;
        double s;
        vec_max_sumexp(xr, len, inner, &m, &s);
        float inv = (float)(1.0 / s);
        for (u64 j = threadIdx.x; j < len; j += blockDim.x) yr[j * inner] = expf(xr[j * inner] - m) * inv;
    }
}

extern "C" __global__ void log_softmax_fwd(const float* x, float* y, u64 outer, u64 len, u64 inner) {
    FOR_EACH_ROW(r, outer * inner) {
        const float* xr = VEC_BASE(x, r);
        float* yr = VEC_BASE(y, r);
        float m;
        double s;
        vec_max_sumexp(xr, len, inner, &m, &s);
        float lse = (float)log(s);
        for (u64 j = threadIdx.x; j < len; j += blockDim.x) yr[j * inner] = xr[j * inner] - m - lse;
    }
}

// out[r] = max + log(sum(exp(x - max))) of each vector: the shift log_softmax_fwd
// subtracts. `out` holds one element per (outer, inner) vector.
extern "C" __global__ void logsumexp_fwd(const float* x, float* out, u64 outer, u64 len, u64 inner) {
    FOR_EACH_ROW(r, outer * inner) {
        const float* xr = VEC_BASE(x, r);
        float m;
        double s;
        vec_max_sumexp(xr, len, inner, &m, &s);
        if (threadIdx.x == 0) out[r] = m + (float)log(s);
    }
}

// dx = y * (dy - sum(dy * y)).
extern "C" __global__ void softmax_bwd(const float* y, const float* dy, float* dx, u64 outer, u64 len,
                                       u64 inner) {
    FOR_EACH_ROW(r, outer * inner) {
        const float* yr = VEC_BASE(y, r);
        const float* gr = VEC_BASE(dy, r);
        float* dr = VEC_BASE(dx, r);
        double dot = 0.0;
        for (u64 j = threadIdx.x; j < len; j += blockDim.x) dot += (double)gr[j * inner] * (double)yr[j * inner];
        float d = (float)block_sum(dot);
        for (u64 j = threadIdx.x; j < len; j += blockDim.x) dr[j * inner] = yr[j * inner] * (gr[j * inner] - d);
    }
}

// Fused cross-entropy over rows of `v` logits: row_loss[r] = logsumexp(row) -
// row[target]; with `want_grad`, grad = (softmax - onehot) * scale (scale = 1/N).
extern "C" __global__ void cross_entropy_fwd_bwd(const float* logits, const float* targets,
                                                 float* row_loss, float* grad, u64 rows, u64 v,
                                                 int want_grad, float scale) {
    FOR_EACH_ROW(r, rows) {
        const float* xr = logits + r * v;
        u64 t = (u64)targets[r];
        float m = -INFINITY;
        for (u64 j = threadIdx.x; j < v; j += blockDim.x) m = nan_max(m, xr[j]);
        m = block_max(m);
        double s = 0.0;
        for (u64 j = threadIdx.x; j < v; j += blockDim.x) s += (double)expf(xr[j] - m);
        s = block_sum(s);
        if (threadIdx.x == 0) row_loss[r] = (float)((double)m + log(s) - (double)xr[t]);
        if (want_grad) {
            float k = (float)(1.0 / s) * scale;
            float* gr = grad + r * v;
            for (u64 j = threadIdx.x; j < v; j += blockDim.x) {
                float g = expf(xr[j] - m) * k;
                gr[j] = (j == t) ? g - scale : g;
            }
        }
    }
}
