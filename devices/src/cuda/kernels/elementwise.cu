// Element-wise kernels: one function per unary op, one per broadcasting binary
// op, and a strided copy (permutations and broadcasts).

#define UNARY(name, expr)                                                      \
    extern "C" __global__ void name(const float* x, float* y, u64 n) {        \
        FOR_EACH(i, n) {                                                       \
            float v = x[i];                                                    \
            y[i] = (expr);                                                     \
        }                                                                      \
    }

UNARY(unary_neg, mlpl_unary(0, v))
UNARY(unary_exp, mlpl_unary(1, v))
UNARY(unary_log, mlpl_unary(2, v))
UNARY(unary_sqrt, mlpl_unary(3, v))
UNARY(unary_abs, mlpl_unary(4, v))
UNARY(unary_sigmoid, mlpl_unary(5, v))
UNARY(unary_tanh, mlpl_unary(6, v))
UNARY(unary_relu, mlpl_unary(7, v))
UNARY(unary_gelu, mlpl_unary(8, v))
UNARY(unary_silu, mlpl_unary(9, v))
UNARY(unary_sin, mlpl_unary(10, v))
UNARY(unary_cos, mlpl_unary(11, v))
UNARY(unary_erf, mlpl_unary(12, v))
UNARY(unary_gelu_erf, mlpl_unary(13, v))

// out[i] = a[offset_a(i)] op b[offset_b(i)] over the broadcast iteration space L.
// A one-element host operand comes by value instead (bit 0 of `konst`: a is `ka`,
// bit 1: b is `kb`), so scalars in expressions need no upload.
#define BINARY(name, expr)                                                            \
    extern "C" __global__ void name(const float* A, const float* B, float* out, u64 n, \
                                    Layout L, float ka, float kb, int konst) {        \
        FOR_EACH(i, n) {                                                              \
            i64 oa, ob;                                                               \
            layout_offsets(L, i, &oa, &ob);                                           \
            float a = (konst & 1) ? ka : A[oa];                                       \
            float b = (konst & 2) ? kb : B[ob];                                       \
            out[i] = (expr);                                                          \
        }                                                                             \
    }

BINARY(binary_add, a + b)
BINARY(binary_sub, a - b)
BINARY(binary_mul, a * b)
BINARY(binary_div, a / b)
BINARY(binary_pow, powf(a, b))
BINARY(binary_gt, a > b ? 1.0f : 0.0f)
BINARY(binary_lt, a < b ? 1.0f : 0.0f)
BINARY(binary_eq, fabs((double)a - (double)b) < 2.220446049250313e-16 ? 1.0f : 0.0f)
BINARY(binary_max, nan_max(a, b))
BINARY(binary_min, nan_min(a, b))

// out[i] = x[base + offset_a(i)]: permutations (strides reordered), broadcasts
// (stride 0) and slices (`base` the first element, the axis's stride times its step).
extern "C" __global__ void copy_strided(const float* x, float* out, u64 n, Layout L, i64 base) {
    FOR_EACH(i, n) {
        i64 oa, ob;
        layout_offsets(L, i, &oa, &ob);
        out[i] = x[base + oa];
    }
}

// out[base + offset_b(i)] = g[offset_a(i)]: a slice's gradient written into a
// zeroed `out` (each position written at most once).
extern "C" __global__ void place_strided(const float* g, float* out, u64 n, Layout L, i64 base) {
    FOR_EACH(i, n) {
        i64 oa, ob;
        layout_offsets(L, i, &oa, &ob);
        out[base + ob] = g[oa];
    }
}

// out[i] = c != 0 ? a : b over one iteration space: `L` holds the strides of c
// (sa) and a (sb), `M` (same dims) those of b (sa). Only the chosen operand is read.
extern "C" __global__ void select_strided(const float* c, const float* a, const float* b, float* out,
                                          u64 n, Layout L, Layout M) {
    FOR_EACH(i, n) {
        i64 oc, oa, ob, unused;
        layout_offsets(L, i, &oc, &oa);
        layout_offsets(M, i, &ob, &unused);
        out[i] = c[oc] != 0.0f ? a[oa] : b[ob];
    }
}
