#!/usr/bin/env bash
# Prepares the build of the MLX backend (`mlpl-devices` feature `mlx`, see
# docs/devices.md) on Linux: installs MLX itself, PyPI's `mlx-cpu==0.32.2` (MLX's
# CPU backend: libmlx.so, its headers and its CMake package), into the gitignored
# local venv `.venv-mlx`, and the system packages the vendored `mlx-sys`
# (third_party/mlx-sys) needs: `cmake` (it builds mlx-c) and `libclang-dev`
# (bindgen). Missing packages are installed with apt-get when the script runs as
# root or CI is set; otherwise, or when an install fails, it says why and exits 77
# (skipped). On macOS it does nothing: mlx-sys builds MLX with Metal itself there.
#
# Idempotent. On success its last lines are the environment the build needs:
#   MLX_DIR=<venv>/.../mlx/share/cmake/MLX      (the CMake package mlx-c finds)
#   MLX_LIB_DIR=<venv>/.../mlx/lib              (libmlx.so; also the rpath)
# Use it as
#   eval "$(bash scripts/mlx-venv.sh | grep '^export ')"
set -uo pipefail
cd "$(dirname "$0")/.."
venv=.venv-mlx
mlx_version=0.32.2

skip() {
    echo "SKIP: mlx-venv: $*; the MLX backend is NOT built or tested" >&2
    exit 77
}

if [ "$(uname -s)" = Darwin ]; then
    echo "mlx-venv: macOS builds MLX with Metal from source (cargo build --features mlpl-devices/mlx); nothing to install" >&2
    exit 0
fi

need_apt=()
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
# bindgen loads libclang at build time.
compgen -G '/usr/lib/llvm-*/lib/libclang.so*' >/dev/null || compgen -G '/usr/lib/*/libclang-[0-9]*.so*' >/dev/null ||
    need_apt+=(libclang-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
    if { [ "$(id -u)" = 0 ] || [ -n "${CI:-}" ]; } && command -v apt-get >/dev/null 2>&1; then
        echo "mlx-venv: installing ${need_apt[*]} with apt-get" >&2
        export DEBIAN_FRONTEND=noninteractive
        sudo_cmd=()
        [ "$(id -u)" = 0 ] || sudo_cmd=(sudo -n)
        "${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq >&2 || true
        "${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need_apt[@]}" >&2 ||
            skip "apt-get install ${need_apt[*]} failed"
    else
        skip "missing ${need_apt[*]} (run as root or set CI=1 to let this script apt-get install them)"
    fi
fi

find_mlx() {
    find "$venv" -path '*/mlx/share/cmake/MLX/MLXConfig.cmake' 2>/dev/null | head -n 1
}
config=$(find_mlx)
if [ -z "$config" ]; then
    command -v python3 >/dev/null 2>&1 || skip "python3 not found"
    { [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"; } || skip "could not create the venv $venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "mlx-cpu==$mlx_version" >&2 ||
        skip "could not install mlx-cpu==$mlx_version from PyPI"
    config=$(find_mlx)
fi
[ -n "$config" ] || skip "the mlx-cpu wheel holds no MLXConfig.cmake"
mlx_dir=$(cd "$(dirname "$config")" && pwd)
lib_dir=$(cd "$mlx_dir/../../../lib" && pwd)
[ -f "$lib_dir/libmlx.so" ] || skip "no libmlx.so in $lib_dir"
echo "export MLX_DIR=$mlx_dir"
echo "export MLX_LIB_DIR=$lib_dir"
