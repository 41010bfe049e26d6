// Fused kernels: an activation's gradient, bias + activation (forward and
// backward) and attention probabilities (scale, causal mask, softmax; forward
// and backward). Each computes, element by element, the operations of the
// kernel sequence it replaces (the `Backend` trait's composed defaults), with
// the rounding intrinsics (`__fmul_rn`, ...) where those are separate kernels,
// so no multiply-add is contracted that the sequence rounds twice.

// dx of y = act(x) given g, `op` coded as in `mlpl_unary`.
__device__ __forceinline__ float act_grad(int op, float x, float y, float g) {
    switch (op) {
    case 0: return -g;
    case 1: return __fmul_rn(g, y);
    case 2: return __fdiv_rn(g, x);
    case 3: return __fmul_rn(__fdiv_rn(g, y), 0.5f);
    case 4: return __fmul_rn(g, __fsub_rn(x > 0.0f ? 1.0f : 0.0f, x < 0.0f ? 1.0f : 0.0f));
    case 5: return __fmul_rn(g, __fmul_rn(y, __fsub_rn(1.0f, y)));
    case 6: return __fmul_rn(g, __fsub_rn(1.0f, __fmul_rn(y, y)));
    case 7: return __fmul_rn(g, x > 0.0f ? 1.0f : 0.0f);
    case 8: {
        const float c = 0.7978846f, k = 0.044715f;
        float x2 = __fmul_rn(x, x);
        float inner = __fmul_rn(x, __fadd_rn(__fmul_rn(x2, k), 1.0f));
        float t = tanhf(__fmul_rn(inner, c));
        float du = __fmul_rn(__fadd_rn(__fmul_rn(x2, 3.0f * k), 1.0f), c);
        float sech2 = __fsub_rn(1.0f, __fmul_rn(t, t));
        float second = __fmul_rn(__fmul_rn(x, sech2), du);
        return __fmul_rn(g, __fmul_rn(__fadd_rn(__fadd_rn(t, 1.0f), second), 0.5f));
    }
    case 9: {
        float s = mlpl_unary(5, x);
        float d = __fmul_rn(s, __fadd_rn(__fmul_rn(x, __fsub_rn(1.0f, s)), 1.0f));
        return __fmul_rn(g, d);
    }
    case 10: return __fmul_rn(g, cosf(x));
    case 11: return __fmul_rn(g, -sinf(x));
    case 12: return __fmul_rn(g, __fmul_rn(expf(-__fmul_rn(x, x)), 1.1283791670955126f));
    default: {
        float cdf = __fmul_rn(__fadd_rn(erff(__fmul_rn(x, 0.70710678118654752f)), 1.0f), 0.5f);
        float pdf = __fmul_rn(expf(__fmul_rn(__fmul_rn(x, x), -0.5f)), 0.3989422804014327f);
        return __fmul_rn(g, __fadd_rn(cdf, __fmul_rn(x, pdf)));
    }
    }
}

extern "C" __global__ void unary_bwd(const float* x, const float* y, const float* g, float* dx, u64 n,
                                     int op) {
    FOR_EACH(i, n) dx[i] = act_grad(op, x[i], y[i], g[i]);
}

// y = act(x + b) with `b` (`width` elements) added to every row of `x`.
extern "C" __global__ void bias_act_fwd(const float* x, const float* b, float* y, u64 n, u64 width,
                                        int op) {
    FOR_EACH(i, n) y[i] = mlpl_unary(op, __fadd_rn(x[i], b[i % width]));
}

// dx = act'(x + b) * g (the bias gradient is dx summed over rows, by `sum_to`).
extern "C" __global__ void bias_act_bwd(const float* x, const float* b, const float* y, const float* g,
                                        float* dx, u64 n, u64 width, int op) {
    FOR_EACH(i, n) dx[i] = act_grad(op, __fadd_rn(x[i], b[i % width]), y[i], g[i]);
}

// Entry j of a score row divided by `divisor`; masked entries (j >= kept) as the
// composed mask makes them: v * 0 + fill.
__device__ __forceinline__ float masked_score(float x, u64 j, u64 kept, float divisor, float fill) {
    float v = __fdiv_rn(x, divisor);
    return j < kept ? v : __fadd_rn(__fmul_rn(v, 0.0f), fill);
}

// Entries of row r of [rows, t, s] scores that are kept: column <= r % t when causal.
__device__ __forceinline__ u64 kept_columns(u64 r, u64 t, u64 s, int causal) {
    if (!causal) return s;
    u64 k = r % t + 1;
    return k < s ? k : s;
}

// Softmax over rows of `s` of the masked, divided scores (one block per row).
extern "C" __global__ void masked_softmax_fwd(const float* x, float* y, u64 rows, u64 t, u64 s,
                                              float divisor, int causal, float fill) {
    FOR_EACH_ROW(r, rows) {
        const float* xr = x + r * s;
        float* yr = y + r * s;
        u64 kept = kept_columns(r, t, s, causal);
        float m = -INFINITY;
        for (u64 j = threadIdx.x; j < s; j += blockDim.x)
            m = nan_max(m, masked_score(xr[j], j, kept, divisor, fill));
        m = block_max(m);
        double sum = 0.0;
        for (u64 j = threadIdx.x; j < s; j += blockDim.x)
            sum += (double)expf(masked_score(xr[j], j, kept, divisor, fill) - m);
        sum = block_sum(sum);
        float inv = (float)(1.0 / sum);
        for (u64 j = threadIdx.x; j < s; j += blockDim.x)
            yr[j] = expf(masked_score(xr[j], j, kept, divisor, fill) - m) * inv;
    }
}

// dx = y * (dy - sum(dy * y)), times 0 where masked, divided by `divisor`.
extern "C" __global__ void masked_softmax_bwd(const float* y, const float* dy, float* dx, u64 rows, u64 t,
                                              u64 s, float divisor, int causal) {
    FOR_EACH_ROW(r, rows) {
        const float* yr = y + r * s;
        const float* gr = dy + r * s;
        float* dr = dx + r * s;
        u64 kept = kept_columns(r, t, s, causal);
        double dot = 0.0;
        for (u64 j = threadIdx.x; j < s; j += blockDim.x) dot += (double)gr[j] * (double)yr[j];
        float d = (float)block_sum(dot);
        for (u64 j = threadIdx.x; j < s; j += blockDim.x) {
            float v = yr[j] * (gr[j] - d);
            if (j >= kept) v = __fmul_rn(v, 0.0f);
            dr[j] = __fdiv_rn(v, divisor);
        }
    }
}
