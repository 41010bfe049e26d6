// Optimizer updates.

// One Adam/AdamW step, written to fresh buffers (the inputs stay unchanged, so
// copies taken before the step keep their values):
// m' = b1 m + (1-b1) g; v' = b2 v + (1-b2) g^2;
// p' = p - lr ((m' * ib1) / (sqrt(v' * ib2) + eps) + wd p), ib = 1 / bias correction.
extern "C" __global__ void adam_update(const float* p, const float* g, const float* m,
                                       const float* v, float* p_out, float* m_out, float* v_out,
                                       u64 n, float lr, float b1, float b2, float eps, float ib1,
                                       float ib2, float wd) {
    FOR_EACH(i, n) {
        float gg = g[i];
        float mm = b1 * m[i] + (1.0f - b1) * gg;
        float vv = b2 * v[i] + (1.0f - b2) * gg * gg;
        float pp = p[i];
        float upd = (mm * ib1) / (sqrtf(vv * ib2) + eps) + wd * pp;
        p_out[i] = pp - lr * upd;
        m_out[i] = mm;
        v_out[i] = vv;
    }
}
