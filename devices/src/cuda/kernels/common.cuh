// Shared by every kernel module of the CUDA backend (prepended to each source
// before NVRTC compiles it). Tensors are dense row-major float32.

#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

typedef unsigned long long u64;
typedef long long i64;

// Most axes a strided kernel handles; the backend merges contiguous axes first
// and falls back to the CPU (visibly) beyond this.
#define MLPL_MAX_RANK 8

// An iteration space of `rank` axes of sizes `dims` and, for up to two inputs,
// the element stride of each axis (0 where an input is broadcast).
struct Layout {
    int rank;
    int pad;
    u64 dims[MLPL_MAX_RANK];
    i64 sa[MLPL_MAX_RANK];
    i64 sb[MLPL_MAX_RANK];
};

// Grid-stride loop over `n` items.
#define FOR_EACH(i, n) \
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < (n); i += (u64)blockDim.x * gridDim.x)

// Grid-stride loop over `n` rows, one block per row.
#define FOR_EACH_ROW(r, n) for (u64 r = blockIdx.x; r < (n); r += gridDim.x)

__device__ __forceinline__ bool mlpl_isnan(float v) { return v != v; }

// NumPy `maximum`: NaN propagates.
__device__ __forceinline__ float nan_max(float a, float b) {
    return (mlpl_isnan(a) || mlpl_isnan(b)) ? a + b : fmaxf(a, b);
}

// NumPy `minimum`: NaN propagates.
__device__ __forceinline__ float nan_min(float a, float b) {
    return (mlpl_isnan(a) || mlpl_isnan(b)) ? a + b : fminf(a, b);
}

__device__ __forceinline__ double warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ double warp_prod(double v) {
    for (int o = 16; o > 0; o >>= 1) v *= __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = nan_max(v, __shfl_down_sync(0xffffffffu, v, o));
    return v;
}

// Block-wide sum (blockDim.x a multiple of 32); every thread gets the result.
__device__ double block_sum(double v) {
    __shared__ double part[32];
    __shared__ double total;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = (lane < (int)(blockDim.x >> 5)) ? part[lane] : 0.0;
        v = warp_sum(v);
        if (lane == 0) total = v;
    }
    __syncthreads();
    v = total;
    __syncthreads();
    return v;
}

// Block-wide product; every thread gets the result.
__device__ double block_prod(double v) {
    __shared__ double part[32];
    __shared__ double total;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_prod(v);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = (lane < (int)(blockDim.x >> 5)) ? part[lane] : 1.0;
        v = warp_prod(v);
        if (lane == 0) total = v;
    }
    __syncthreads();
    v = total;
    __syncthreads();
    return v;
}

// Block-wide maximum (NaN propagates); every thread gets the result.
__device__ float block_max(float v) {
    __shared__ float part[32];
    __shared__ float total;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_max(v);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = (lane < (int)(blockDim.x >> 5)) ? part[lane] : -INFINITY;
        v = warp_max(v);
        if (lane == 0) total = v;
    }
    __syncthreads();
    v = total;
    __syncthreads();
    return v;
}

// Offsets of flat index `i` of the iteration space in the two inputs.
__device__ __forceinline__ void layout_offsets(const Layout& L, u64 i, i64* oa, i64* ob) {
    i64 a = 0, b = 0;
    for (int d = L.rank - 1; d >= 0; --d) {
        u64 q = i % L.dims[d];
        i /= L.dims[d];
        a += (i64)q * L.sa[d];
        b += (i64)q * L.sb[d];
    }
    *oa = a;
    *ob = b;
}

// The element-wise functions of `UnaryOp`, by code in the enum's order (neg,
// exp, log, sqrt, abs, sigmoid, tanh, relu, gelu, silu, sin, cos, erf, gelu_erf): the unary kernels and
// the fused bias + activation kernels share them.
__device__ __forceinline__ float mlpl_unary(int op, float v) {
    switch (op) {
    case 0: return -v;
    case 1: return expf(v);
    case 2: return logf(v);
    case 3: return sqrtf(v);
    case 4: return fabsf(v);
    case 5: return 1.0f / (1.0f + expf(-v));
    case 6: return tanhf(v);
    case 7: return v > 0.0f ? v : 0.0f;
    case 8: return v / (1.0f + expf(-2.0f * 0.7978845608028654f * (v + 0.044715f * v * v * v)));
    case 9: return v / (1.0f + expf(-v));
    case 10: return sinf(v);
    case 11: return cosf(v);
    case 12: return erff(v);
    default: return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
}
