// A tensor stored in a checkpoint file, used in place from the file mapping.
#pragma once

#include <cstddef>
#include <cstdint>
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

}  // namespace strata::io
