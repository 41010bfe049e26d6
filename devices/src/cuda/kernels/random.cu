// Counter-based random masks (no state: element i depends only on the key and i).

__device__ __forceinline__ u64 splitmix64(u64 z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Dropout mask (LANGUAGE §13.7): out[i] = scale when
// (splitmix64(key + i * golden_gamma) >> 11) * 2^-53 >= p, else 0.
extern "C" __global__ void dropout_mask(float* out, u64 n, u64 key, double p, float scale) {
    FOR_EACH(i, n) {
        u64 bits = splitmix64(key + i * 0x9E3779B97F4A7C15ull) >> 11;
        out[i] = ((double)bits * 1.1102230246251565e-16 >= p) ? scale : 0.0f;
    }
}
