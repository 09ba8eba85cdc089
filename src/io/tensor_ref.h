// A tensor stored in a checkpoint file, used in place from the file mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace strata::io {

struct TensorRef {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // row-major, outermost dimension first (PyTorch order)
  const std::byte* data = nullptr;
  size_t nbytes = 0;
  std::string file;  // the file it lives in, for error messages

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  std::string shape_string() const;  // "[512, 64]"
};

// The element count of `shape`, or nullopt when a dimension is negative or the product of the
// non-zero dimensions does not fit in int64 (then no order of multiplying them is safe, even when
// a zero dimension makes the count 0). Readers check shapes from files with it before numel().
std::optional<int64_t> checked_numel(const std::vector<int64_t>& shape);
// The bytes `numel` elements of `dtype` take, or nullopt when that does not fit in int64.
std::optional<int64_t> checked_bytes(DType dtype, int64_t numel);

}  // namespace strata::io
