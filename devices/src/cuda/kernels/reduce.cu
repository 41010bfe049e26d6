// Reductions. The input is viewed as [outer, len, inner] and reduced along the
// middle axis into [outer, inner]; one block per output element.

#define ROW_BASE(x, r) ((x) + ((r) / inner) * len * inner + ((r) % inner))

extern "C" __global__ void reduce_sum(const float* x, float* out, u64 outer, u64 len, u64 inner) {
    FOR_EACH_ROW(r, outer * inner) {
        const float* base = ROW_BASE(x, r);
        double acc = 0.0;
        for (u64 j = threadIdx.x; j < len; j += blockDim.x) acc += (double)base[j * inner];
        acc = block_sum(acc);
        if (threadIdx.x == 0) out[r] = (float)acc;
    }
}

extern "C" __global__ void reduce_mean(const float* x, float* out, u64 outer, u64 len, u64 inner) {
    FOR_EACH_ROW(r, outer * inner) {
        const float* base = ROW_BASE(x, r);
        double acc = 0.0;
        for (u64 j = threadIdx.x; j < len; j += blockDim.x) acc += (double)base[j * inner];
        acc = block_sum(acc);
        if (threadIdx.x == 0) out[r] = (float)(acc / (double)(len > 0 ? len : 1));
    }
}

extern "C" __global__ void reduce_prod(const float* x, float* out, u64 outer, u64 len, u64 inner) {
    FOR_EACH_ROW(r, outer * inner) {
        const float* base = ROW_BASE(x, r);
        double acc = 1.0;
        for (u64 j = threadIdx.x; j < len; j += blockDim.x) acc *= (double)base[j * inner];
        acc = block_prod(acc);
        if (threadIdx.x == 0) out[r] = (float)acc;
    }
}

extern "C" __global__ void reduce_max(const float* x, float* out, u64 outer, u64 len, u64 inner) {
    FOR_EACH_ROW(r, outer * inner) {
        const float* base = ROW_BASE(x, r);
        float acc = -INFINITY;
        for (u64 j = threadIdx.x; j < len; j += blockDim.x) acc = nan_max(acc, base[j * inner]);
        acc = block_max(acc);
        if (threadIdx.x == 0) out[r] = acc;
    }
}

// Index of the first maximum (NaN never greater; all-NaN or empty gives 0), one
// thread per output element.
extern "C" __global__ void argmax(const float* x, float* out, u64 outer, u64 len, u64 inner) {
    FOR_EACH(r, outer * inner) {
        const float* base = ROW_BASE(x, r);
        float best = -INFINITY;
        u64 at = 0;
        bool found = false;
        for (u64 j = 0; j < len; ++j) {
            float v = base[j * inner];
            if (v > best || (!found && !mlpl_isnan(v))) {
                best = v;
                at = j;
                found = true;
            }
        }
        out[r] = (float)at;
    }
}

// Sums a broadcast gradient back to a smaller shape: one thread per output
// element; K holds the kept axes (sizes, input strides), R the summed ones.
extern "C" __global__ void sum_to(const float* g, float* out, u64 n_out, u64 n_red, Layout K,
                                  Layout R) {
    FOR_EACH(o, n_out) {
        i64 base, unused;
        layout_offsets(K, o, &base, &unused);
        double acc = 0.0;
        for (u64 k = 0; k < n_red; ++k) {
            i64 off;
            layout_offsets(R, k, &off, &unused);
            acc += (double)g[base + off];
        }
        out[o] = (float)acc;
    }
}
