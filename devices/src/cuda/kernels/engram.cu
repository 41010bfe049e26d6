// Engram conditional memory: hashed n-gram rows and the short causal
// depthwise convolution with its gradient. The hash is the integer function of
// `engram.rs`; the sums are of exact f32*f32 products in double, in the CPU's
// order, so the results are the CPU's bits.

__device__ __forceinline__ u64 engram_mix(u64 z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// out[s, t, slot] for `n_seq` sequences of `t_len` ids; slot = o * heads + h,
// order o is byte o of `orders_packed` (n_orders <= 8).
extern "C" __global__ void engram_hash(const float* ids, float* out, u64 n_seq, u64 t_len,
                                       u64 orders_packed, u64 n_orders, u64 heads, u64 rows,
                                       u64 seed) {
    u64 slots = n_orders * heads;
    FOR_EACH(i, n_seq * t_len * slots) {
        u64 slot = i % slots;
        u64 pos = (i / slots) % t_len;
        u64 seq = i / (slots * t_len);
        u64 order = (orders_packed >> (8 * (slot / heads))) & 0xFF;
        u64 head = slot % heads;
        u64 acc = engram_mix(seed + 0x9E3779B97F4A7C15ull * ((order << 16) + head + 1));
        const float* s = ids + seq * t_len;
        for (u64 j = 0; j < order; ++j) {
            u64 back = order - 1 - j;
            u64 id = back > pos ? 0xFFFFFFFFFFFFFFFFull : (u64)s[pos - back];
            acc = engram_mix(acc ^ id);
        }
        out[i] = (float)(slot * rows + acc % rows);
    }
}

// y[b, t, c] = sum_{j < k, j <= t} w[j, c] * x[b, t - j, c].
extern "C" __global__ void causal_conv(const float* x, const float* w, float* y, u64 n_seq,
                                       u64 t_len, u64 c, u64 k) {
    FOR_EACH(i, n_seq * t_len * c) {
        u64 ch = i % c;
        u64 pos = (i / c) % t_len;
        double acc = 0.0;
        for (u64 j = 0; j < k && j <= pos; ++j) acc += (double)w[j * c + ch] * (double)x[i - j * c];
        y[i] = (float)acc;
    }
}

// dx[b, t, c] = sum_{j < k, t + j < T} w[j, c] * dy[b, t + j, c].
extern "C" __global__ void causal_conv_dx(const float* w, const float* dy, float* dx, u64 n_seq,
                                          u64 t_len, u64 c, u64 k) {
    FOR_EACH(i, n_seq * t_len * c) {
        u64 ch = i % c;
        u64 pos = (i / c) % t_len;
        double acc = 0.0;
        for (u64 j = 0; j < k && pos + j < t_len; ++j)
            acc += (double)w[j * c + ch] * (double)dy[i + j * c];
        dx[i] = (float)acc;
    }
}

// dw[j, c] = sum_b sum_{t >= j} dy[b, t, c] * x[b, t - j, c], b then t ascending.
extern "C" __global__ void causal_conv_dw(const float* x, const float* dy, float* dw, u64 n_seq,
                                          u64 t_len, u64 c, u64 k) {
    FOR_EACH(i, k * c) {
        u64 ch = i % c;
        u64 j = i / c;
        double acc = 0.0;
        for (u64 b = 0; b < n_seq; ++b) {
            u64 base = b * t_len * c;
            for (u64 t = j; t < t_len; ++t)
                acc += (double)dy[base + t * c + ch] * (double)x[base + (t - j) * c + ch];
        }
        dw[i] = (float)acc;
    }
}
