#include "io/tensor_ref.h"

namespace strata::io {

std::string TensorRef::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::optional<int64_t> checked_numel(const std::vector<int64_t>& shape) {
  int64_t nonzero = 1;
  bool has_zero = false;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d == 0) {
      has_zero = true;
    } else if (__builtin_mul_overflow(nonzero, d, &nonzero)) {
      return std::nullopt;
    }
  }
  return has_zero ? 0 : nonzero;
}

std::optional<int64_t> checked_bytes(DType dtype, int64_t numel) {
  int64_t bytes = 0;
  if (__builtin_mul_overflow(numel / dtype_block_elems(dtype), dtype_block_bytes(dtype), &bytes))
    return std::nullopt;
  return bytes;
}

}  // namespace strata::io
