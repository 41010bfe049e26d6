// Embedding rows: gather and its gradient, scatter-add.

// out[i, :] = table[ids[i], :].
extern "C" __global__ void gather_rows(const float* table, const float* ids, float* out, u64 n_ids,
                                       u64 d) {
    FOR_EACH(i, n_ids * d) {
        u64 row = (u64)ids[i / d];
        out[i] = table[row * d + i % d];
    }
}

// out[ids[i], :] += src[i, :] with `out` zeroed first. One thread per column
// walks the ids in order, so sums are deterministic (same order as the CPU).
extern "C" __global__ void scatter_add_rows(const float* ids, const float* src, float* out,
                                            u64 n_ids, u64 d) {
    FOR_EACH(j, d) {
        for (u64 i = 0; i < n_ids; ++i) out[(u64)ids[i] * d + j] += src[i * d + j];
    }
}
