// Vendored change 3 (CHANGES.md): mlx-c 0.7.0 declares and defines the float16 and
// bfloat16 accessors only on ARM (`half.h`), but mlx-rs 0.33 calls them on every
// target. Elsewhere they are provided here over MLX's own 16-bit types, as 2-byte
// bit copies (the Rust side declares `float16_t(u16)` and `bfloat16_t = u16`).
#include <cstdint>
#include <cstring>
#include <exception>

#include "mlx/c/error.h"
#include "mlx/c/array.h"
#include "mlx/c/private/mlx.h"

#if !(defined(__ARM_FEATURE_FP16_SCALAR_ARITHMETIC) || defined(__aarch64__))
extern "C" int mlx_array_item_float16(uint16_t* res, const mlx_array arr) {
  try {
    auto v = mlx_array_get_(arr).item<mlx::core::float16_t>();
    std::memcpy(res, &v, sizeof(uint16_t));
  } catch (std::exception& e) {
    mlx_error(e.what());
    return 1;
  }
  return 0;
}

extern "C" const uint16_t* mlx_array_data_float16(const mlx_array arr) {
  try {
    return reinterpret_cast<const uint16_t*>(
        mlx_array_get_(arr).data<mlx::core::float16_t>());
  } catch (std::exception& e) {
    mlx_error(e.what());
    return nullptr;
  }
}
#endif

#if !(defined(__ARM_FEATURE_BF16) || defined(__aarch64__))
extern "C" int mlx_array_item_bfloat16(uint16_t* res, const mlx_array arr) {
  try {
    auto v = mlx_array_get_(arr).item<mlx::core::bfloat16_t>();
    std::memcpy(res, &v, sizeof(uint16_t));
  } catch (std::exception& e) {
    mlx_error(e.what());
    return 1;
  }
  return 0;
}

extern "C" const uint16_t* mlx_array_data_bfloat16(const mlx_array arr) {
  try {
    return reinterpret_cast<const uint16_t*>(
        mlx_array_get_(arr).data<mlx::core::bfloat16_t>());
  } catch (std::exception& e) {
    mlx_error(e.what());
    return nullptr;
  }
}
#endif
