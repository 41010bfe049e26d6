# Sourced by bench/devices/run.sh and bench/train/run.sh: `ISA=avx2` runs each
# program's AVX2 code on an AVX-512 machine. Exports MLPL_CPU_ISA for MLPL (its
# GEMM and every vectorised kernel) and sets ISA_LIMIT, the environment that
# holds the peers' libraries to the same level: OpenBLAS's Haswell kernels,
# MKL's, oneDNN's and ATen's AVX2 paths (env assignments, for `env`; empty
# without ISA). JAX and MLX have no such switch (bench/train/run.sh says why).
ISA_LIMIT=()
case "${ISA:-}" in
  "") ;;
  avx2)
    export MLPL_CPU_ISA=avx2
    ISA_LIMIT=(OPENBLAS_CORETYPE=Haswell MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2)
    ;;
  *) echo "ISA=$ISA: only avx2 can be emulated" >&2; exit 2 ;;
esac
