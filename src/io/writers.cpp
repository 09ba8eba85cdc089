#include "io/writers.h"

#include <cstring>

#include "core/file_util.h"
#include "core/json.h"

namespace strata::io {
namespace {

const char* st_dtype(DType t) {
  switch (t) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kF8E4M3:
      return "F8_E4M3";
    case DType::kI8:
      return "I8";
    case DType::kU8:
      return "U8";
    case DType::kI16:
      return "I16";
    case DType::kI32:
      return "I32";
    case DType::kI64:
      return "I64";
    case DType::kF64:
      return "F64";
    case DType::kBool:
      return "BOOL";
    default:
      return nullptr;
  }
}

uint32_t ggml_type_of(DType t, bool* ok) {
  *ok = true;
  switch (t) {
    case DType::kF32:
      return 0;
    case DType::kF16:
      return 1;
    case DType::kQ8_0:
      return 8;
    case DType::kBF16:
      return 30;
    case DType::kQ4_0:
      return 2;
    case DType::kQ4_1:
      return 3;
    case DType::kQ5_0:
      return 6;
    case DType::kQ5_1:
      return 7;
    case DType::kQ2_K:
      return 10;
    case DType::kQ3_K:
      return 11;
    case DType::kQ4_K:
      return 12;
    case DType::kQ5_K:
      return 13;
    case DType::kQ6_K:
      return 14;
    case DType::kIQ4_NL:
      return 20;
    case DType::kIQ4_XS:
      return 23;
    default:
      *ok = false;
      return 0;
  }
}

template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}
void put_str(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

}  // namespace

Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  OrderedJson header = OrderedJson::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    const char* dt = t.st_dtype.empty() ? st_dtype(t.dtype) : t.st_dtype.c_str();
    if (dt == nullptr)
      return invalid_argument("safetensors cannot hold " + std::string(dtype_name(t.dtype)));
    header[t.name] = {
        {"dtype", dt}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string h = header.dump();
  while ((h.size() + 8) % 8 != 0) h += ' ';
  std::string out;
  put<uint64_t>(out, h.size());
  out += h;
  for (const auto& t : tensors) out += t.bytes;
  return write_file(path, out);
}

Status write_gguf(const std::string& path, const std::vector<GgufMeta>& metadata,
                  const std::vector<TensorToWrite>& tensors, uint32_t alignment) {
  std::string out;
  put<uint32_t>(out, 0x46554747);
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors.size());
  put<uint64_t>(out, metadata.size());
  for (const auto& m : metadata) {
    put_str(out, m.key);
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, uint32_t>) {
            put<uint32_t>(out, 4);
            put(out, v);
          } else if constexpr (std::is_same_v<T, int32_t>) {
            put<uint32_t>(out, 5);
            put(out, v);
          } else if constexpr (std::is_same_v<T, int64_t>) {
            put<uint32_t>(out, 11);
            put(out, v);
          } else if constexpr (std::is_same_v<T, float>) {
            put<uint32_t>(out, 6);
            put(out, v);
          } else if constexpr (std::is_same_v<T, bool>) {
            put<uint32_t>(out, 7);
            put<uint8_t>(out, v);
          } else if constexpr (std::is_same_v<T, std::string>) {
            put<uint32_t>(out, 8);
            put_str(out, v);
          } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            put<uint32_t>(out, 9);
            put<uint32_t>(out, 8);
            put<uint64_t>(out, v.size());
            for (const auto& s : v) put_str(out, s);
          } else if constexpr (std::is_same_v<T, std::vector<float>>) {
            put<uint32_t>(out, 9);
            put<uint32_t>(out, 6);
            put<uint64_t>(out, v.size());
            for (float f : v) put(out, f);
          } else if constexpr (std::is_same_v<T, std::vector<int32_t>>) {
            put<uint32_t>(out, 9);
            put<uint32_t>(out, 5);
            put<uint64_t>(out, v.size());
            for (int32_t x : v) put(out, x);
          }
        },
        m.value);
  }
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const auto& t : tensors) {
    bool ok;
    uint32_t gt = ggml_type_of(t.dtype, &ok);
    if (!ok) return invalid_argument("GGUF writer cannot hold " + std::string(dtype_name(t.dtype)));
    put_str(out, t.name);
    put<uint32_t>(out, t.shape.size());
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) put<uint64_t>(out, *it);
    put<uint32_t>(out, gt);
    put<uint64_t>(out, offset);
    offsets.push_back(offset);
    offset += (t.bytes.size() + alignment - 1) / alignment * alignment;
  }
  while (out.size() % alignment) out += '\0';
  for (const auto& t : tensors) {
    out += t.bytes;
    while (out.size() % alignment) out += '\0';
  }
  return write_file(path, out);
}

}  // namespace strata::io
