// GGUF (v2 and v3) reader: typed metadata and a tensor table over a memory-mapped file.
// Every offset and length is checked against the file size, so a truncated or corrupt file gives
// a clear error naming the file (and the key or tensor), never a crash.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "io/mapped_file.h"
#include "io/tensor_ref.h"

namespace strata::io {

enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

const char* gguf_type_name(GgufType t);

// One metadata value. Scalars are held decoded; arrays point into the mapping.
struct GgufValue {
  GgufType type = GgufType::kU8;
  int64_t i = 0;         // integer and bool scalars (u64 values above INT64_MAX are clamped)
  double f = 0;          // float scalars
  std::string_view str;  // string scalar
  // Arrays:
  GgufType elem_type = GgufType::kU8;
  uint64_t count = 0;
  const std::byte* array_data = nullptr;  // numeric arrays: packed elements
  std::vector<std::string_view> strings;  // string arrays

  bool is_array() const { return type == GgufType::kArray; }
  bool is_integer() const;
  bool is_float() const { return type == GgufType::kF32 || type == GgufType::kF64; }
};

struct GgufTensorInfo {
  std::string name;
  uint32_t ggml_type = 0;
  std::vector<int64_t> ne;  // GGUF order: ne[0] is the innermost (fastest varying) dimension
  uint64_t offset = 0;      // relative to the data section
};

class GgufFile {
 public:
  static Result<std::unique_ptr<GgufFile>> open(const std::string& path);
  // Reads an already opened file (MappedFile::from_memory for bytes that are not on disk).
  static Result<std::unique_ptr<GgufFile>> open(std::unique_ptr<MappedFile> file);

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return version_; }
  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;

  // Typed lookups: nullopt when absent; an error when present with an incompatible type.
  Result<std::optional<std::string>> get_string(std::string_view key) const;
  Result<std::optional<int64_t>> get_int(std::string_view key) const;
  Result<std::optional<double>> get_float(std::string_view key) const;  // accepts integers too
  Result<std::optional<bool>> get_bool(std::string_view key) const;
  Result<std::vector<std::string_view>> get_string_array(std::string_view key) const;
  Result<std::vector<int64_t>> get_int_array(std::string_view key) const;
  Result<std::vector<float>> get_float_array(std::string_view key) const;

  // general.architecture ("llama", "qwen2", ...), or "" when absent.
  std::string architecture() const;

  const std::vector<GgufTensorInfo>& tensor_infos() const { return tensors_; }
  // A tensor as a TensorRef (PyTorch order shape). Errors for unknown names and ggml types
  // Strata cannot compute with (supported: F32, F16, BF16, Q8_0, Q4_0/1, Q5_0/1, Q2_K..Q6_K,
  // IQ4_NL, IQ4_XS).
  Result<TensorRef> tensor(std::string_view name) const;
  // Drops the tensor's pages from memory once its bytes were copied (MappedFile::release).
  void release(const TensorRef& t) const { file_->release(t.data, t.nbytes); }
  bool has_tensor(std::string_view name) const;

 private:
  GgufFile() = default;
  std::unique_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// ggml type id -> name ("Q4_K", ...), block size in elements and bytes; 0 when unknown.
const char* ggml_type_name(uint32_t ggml_type);
int64_t ggml_type_block_elems(uint32_t ggml_type);
int64_t ggml_type_block_bytes(uint32_t ggml_type);

}  // namespace strata::io
