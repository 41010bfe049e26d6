// RMS and layer norm over the last axis (`d` elements per row), forward and
// backward; one block per row.

// y = x * r, r = 1 / sqrt(mean(x^2) + eps); inv_rms[row] = r.
extern "C" __global__ void rms_norm_fwd(const float* x, float* y, float* inv_rms, u64 rows, u64 d,
                                        float eps) {
    FOR_EACH_ROW(r, rows) {
        const float* xr = x + r * d;
        double ss = 0.0;
        for (u64 j = threadIdx.x; j < d; j += blockDim.x) ss += (double)xr[j] * (double)xr[j];
        ss = block_sum(ss);
        double ms = ss / (double)(d > 0 ? d : 1);
        float inv = (float)(1.0 / sqrt(ms + (double)eps));
        for (u64 j = threadIdx.x; j < d; j += blockDim.x) y[r * d + j] = xr[j] * inv;
        if (threadIdx.x == 0) inv_rms[r] = inv;
    }
}

// dx = r * dy - r^3 * x * sum(dy * x) / d.
extern "C" __global__ void rms_norm_bwd(const float* x, const float* inv_rms, const float* dy,
                                        float* dx, u64 rows, u64 d) {
    FOR_EACH_ROW(r, rows) {
        const float* xr = x + r * d;
        const float* gr = dy + r * d;
        double dot = 0.0;
        for (u64 j = threadIdx.x; j < d; j += blockDim.x) dot += (double)xr[j] * (double)gr[j];
        dot = block_sum(dot);
        float ri = inv_rms[r];
        float k = (float)((double)ri * (double)ri * (double)ri * dot / (double)(d > 0 ? d : 1));
        for (u64 j = threadIdx.x; j < d; j += blockDim.x) dx[r * d + j] = ri * gr[j] - k * xr[j];
    }
}

// y = (x - mu) * s, s = 1 / sqrt(var + eps) (biased variance); saves mu and s.
extern "C" __global__ void layer_norm_fwd(const float* x, float* y, float* mean, float* inv_std,
                                          u64 rows, u64 d, float eps) {
    FOR_EACH_ROW(r, rows) {
        const float* xr = x + r * d;
        double n = (double)(d > 0 ? d : 1);
        double sum = 0.0;
        for (u64 j = threadIdx.x; j < d; j += blockDim.x) sum += (double)xr[j];
        double mu = block_sum(sum) / n;
        double sq = 0.0;
        for (u64 j = threadIdx.x; j < d; j += blockDim.x) {
            double c = (double)xr[j] - mu;
            sq += c * c;
        }
        double var = block_sum(sq) / n;
        double inv = 1.0 / sqrt(var + (double)eps);
        for (u64 j = threadIdx.x; j < d; j += blockDim.x) y[r * d + j] = (float)(((double)xr[j] - mu) * inv);
        if (threadIdx.x == 0) {
            mean[r] = (float)mu;
            inv_std[r] = (float)inv;
        }
    }
}

// dx = s * (dy - mean(dy) - xhat * mean(dy * xhat)), xhat = (x - mu) * s.
extern "C" __global__ void layer_norm_bwd(const float* x, const float* mean, const float* inv_std,
                                          const float* dy, float* dx, u64 rows, u64 d) {
    FOR_EACH_ROW(r, rows) {
        const float* xr = x + r * d;
        const float* gr = dy + r * d;
        float m = mean[r], s = inv_std[r];
        double n = (double)(d > 0 ? d : 1);
        double sg = 0.0, sgx = 0.0;
        for (u64 j = threadIdx.x; j < d; j += blockDim.x) {
            sg += (double)gr[j];
            sgx += (double)gr[j] * (double)((xr[j] - m) * s);
        }
        float mg = (float)(block_sum(sg) / n);
        float mgx = (float)(block_sum(sgx) / n);
        for (u64 j = threadIdx.x; j < d; j += blockDim.x)
            dx[r * d + j] = s * (gr[j] - mg - (xr[j] - m) * s * mgx);
    }
}
