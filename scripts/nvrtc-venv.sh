#!/usr/bin/env bash
# Installs NVIDIA's runtime CUDA compiler (NVRTC, PyPI wheel `nvidia-cuda-nvrtc-cu12`)
# into the gitignored local venv `.venv-nvrtc`, so the kernel compile test
# (`cargo test -p mlpl-devices --features cuda --test cuda_kernels_compile`) can turn
# every CUDA kernel source into PTX on machines without a GPU or CUDA toolkit.
#
# Idempotent: does nothing when the library is already there. Prints the library's
# path on its last line; the test finds it there or through `MLPL_NVRTC_LIB`.
# Never fails the caller: without network or Python it says why and exits 0, and
# the kernel test then skips with a message.
set -uo pipefail
cd "$(dirname "$0")/.."
venv=.venv-nvrtc
find_lib() {
    find "$venv" -path '*nvidia/cuda_nvrtc/lib/libnvrtc.so*' -name 'libnvrtc.so.*' \
        ! -name '*builtins*' 2>/dev/null | sort | head -n 1
}
lib=$(find_lib)
if [ -z "$lib" ]; then
    if ! command -v python3 >/dev/null; then
        echo "nvrtc-venv: python3 not found; the CUDA kernel compile test will skip" >&2
        exit 0
    fi
    if ! { [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"; } ||
        ! "$venv/bin/pip" install --quiet --disable-pip-version-check \
            'nvidia-cuda-nvrtc-cu12>=12.8,<13'; then
        echo "nvrtc-venv: could not install nvidia-cuda-nvrtc-cu12; the CUDA kernel compile test will skip" >&2
        exit 0
    fi
    lib=$(find_lib)
fi
if [ -z "$lib" ]; then
    echo "nvrtc-venv: the wheel holds no libnvrtc.so; the CUDA kernel compile test will skip" >&2
    exit 0
fi
echo "$(pwd)/$lib"
