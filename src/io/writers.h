// Writers for safetensors and GGUF files. Used by tests (to build checkpoints with every dtype,
// and corrupt ones) and by tools that export weights.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace strata::io {

struct TensorToWrite {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // PyTorch order
  std::string bytes;           // raw data, dtype_bytes(dtype, numel) long
  // safetensors only: the header's dtype string when it is not `dtype`'s own name (F8_E8M0
  // scales are written as U8 bytes under "F8_E8M0").
  std::string st_dtype;
};

Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

// GGUF metadata values: integers are written as u32 or i64 per the alternative chosen.
struct GgufMeta {
  using Value = std::variant<uint32_t, int32_t, int64_t, float, bool, std::string,
                             std::vector<std::string>, std::vector<float>, std::vector<int32_t>>;
  std::string key;
  Value value;
};

// GGUF v3. Tensor shapes are given in PyTorch order and written reversed (ggml ne order).
Status write_gguf(const std::string& path, const std::vector<GgufMeta>& metadata,
                  const std::vector<TensorToWrite>& tensors, uint32_t alignment = 32);

}  // namespace strata::io
