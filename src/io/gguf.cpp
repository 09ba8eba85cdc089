#include "io/gguf.h"

#include <cstring>
#include <limits>

namespace strata::io {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint64_t kMaxArrayElems = 1ull << 32;
constexpr uint64_t kMaxStringBytes = 1ull << 30;

struct GgmlTypeInfo {
  uint32_t id;
  const char* name;
  int64_t block_elems;
  int64_t block_bytes;
};

// Sizes of the ggml types we may meet, so that even unsupported tensors can be bounds-checked.
constexpr GgmlTypeInfo kGgmlTypes[] = {
    {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},
    {3, "Q4_1", 32, 20},      {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 36},      {10, "Q2_K", 256, 84},
    {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66},
    {17, "IQ2_XS", 256, 74},  {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},  {22, "IQ2_S", 256, 82},
    {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},
    {26, "I32", 1, 4},        {27, "I64", 1, 8},        {28, "F64", 1, 8},
    {29, "IQ1_M", 256, 56},   {30, "BF16", 1, 2},
};

const GgmlTypeInfo* ggml_info(uint32_t id) {
  for (const auto& t : kGgmlTypes)
    if (t.id == id) return &t;
  return nullptr;
}

class Reader {
 public:
  Reader(const std::byte* data, size_t size, const std::string& path)
      : data_(data), size_(size), path_(path) {}
  size_t pos() const { return pos_; }

  Status need(size_t n, const char* what) {
    if (n > size_ - pos_) {
      return data_loss("GGUF file '" + path_ + "' is truncated: reading " + what + " at byte " +
                       std::to_string(pos_) + " needs " + std::to_string(n) + " bytes, file has " +
                       std::to_string(size_));
    }
    return ok_status();
  }
  template <typename T>
  Result<T> read(const char* what) {
    STRATA_RETURN_IF_ERROR(need(sizeof(T), what));
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  Result<std::string_view> read_string(const char* what) {
    STRATA_ASSIGN_OR_RETURN(uint64_t len, read<uint64_t>(what));
    if (len > kMaxStringBytes)
      return data_loss("GGUF file '" + path_ + "': " + what + " has an implausible length " +
                       std::to_string(len));
    STRATA_RETURN_IF_ERROR(need(len, what));
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return s;
  }
  const std::byte* here() const { return data_ + pos_; }
  Status skip(size_t n, const char* what) {
    STRATA_RETURN_IF_ERROR(need(n, what));
    pos_ += n;
    return ok_status();
  }

 private:
  const std::byte* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& path_;
};

size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
      return 8;
    default:
      return 0;
  }
}

// Reads a numeric scalar of type `t` at `p` into i or f.
void decode_scalar(GgufType t, const std::byte* p, int64_t* i, double* f) {
  auto get = [&](auto v) {
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  switch (t) {
    case GgufType::kU8:
      *i = get(uint8_t{});
      break;
    case GgufType::kI8:
      *i = get(int8_t{});
      break;
    case GgufType::kBool:
      *i = get(uint8_t{}) != 0;
      break;
    case GgufType::kU16:
      *i = get(uint16_t{});
      break;
    case GgufType::kI16:
      *i = get(int16_t{});
      break;
    case GgufType::kU32:
      *i = get(uint32_t{});
      break;
    case GgufType::kI32:
      *i = get(int32_t{});
      break;
    case GgufType::kU64: {
      uint64_t v = get(uint64_t{});
      *i = v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
               ? std::numeric_limits<int64_t>::max()
               : static_cast<int64_t>(v);
      break;
    }
    case GgufType::kI64:
      *i = get(int64_t{});
      break;
    case GgufType::kF32:
      *f = get(float{});
      break;
    case GgufType::kF64:
      *f = get(double{});
      break;
    default:
      break;
  }
}

Status read_value(Reader& r, GgufType type, GgufValue* out, const std::string& key,
                  const std::string& path, bool nested) {
  out->type = type;
  if (type == GgufType::kString) {
    STRATA_ASSIGN_OR_RETURN(out->str, r.read_string(key.c_str()));
    return ok_status();
  }
  if (type == GgufType::kArray) {
    if (nested)
      return unimplemented("GGUF file '" + path + "': nested arrays in '" + key +
                           "' are not supported");
    STRATA_ASSIGN_OR_RETURN(uint32_t et, r.read<uint32_t>("array type"));
    STRATA_ASSIGN_OR_RETURN(uint64_t count, r.read<uint64_t>("array length"));
    if (count > kMaxArrayElems)
      return data_loss("GGUF file '" + path + "': array '" + key + "' has an implausible length");
    out->elem_type = static_cast<GgufType>(et);
    out->count = count;
    if (out->elem_type == GgufType::kString) {
      STRATA_RETURN_IF_ERROR(r.need(count * 8, key.c_str()));  // each string has an 8-byte length
      out->strings.reserve(count);
      for (uint64_t k = 0; k < count; ++k) {
        STRATA_ASSIGN_OR_RETURN(std::string_view s, r.read_string(key.c_str()));
        out->strings.push_back(s);
      }
      return ok_status();
    }
    size_t es = scalar_size(out->elem_type);
    if (es == 0)
      return data_loss("GGUF file '" + path + "': array '" + key + "' has unknown element type " +
                       std::to_string(et));
    out->array_data = r.here();
    return r.skip(es * count, key.c_str());
  }
  size_t s = scalar_size(type);
  if (s == 0)
    return data_loss("GGUF file '" + path + "': key '" + key + "' has unknown value type " +
                     std::to_string(static_cast<uint32_t>(type)));
  STRATA_RETURN_IF_ERROR(r.need(s, key.c_str()));
  decode_scalar(type, r.here(), &out->i, &out->f);
  return r.skip(s, key.c_str());
}

}  // namespace

const char* gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::kU8:
      return "u8";
    case GgufType::kI8:
      return "i8";
    case GgufType::kU16:
      return "u16";
    case GgufType::kI16:
      return "i16";
    case GgufType::kU32:
      return "u32";
    case GgufType::kI32:
      return "i32";
    case GgufType::kF32:
      return "f32";
    case GgufType::kBool:
      return "bool";
    case GgufType::kString:
      return "string";
    case GgufType::kArray:
      return "array";
    case GgufType::kU64:
      return "u64";
    case GgufType::kI64:
      return "i64";
    case GgufType::kF64:
      return "f64";
  }
  return "?";
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kU16:
    case GgufType::kI16:
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kBool:
      return true;
    default:
      return false;
  }
}

const char* ggml_type_name(uint32_t t) {
  const GgmlTypeInfo* i = ggml_info(t);
  return i ? i->name : "unknown";
}
int64_t ggml_type_block_elems(uint32_t t) {
  const GgmlTypeInfo* i = ggml_info(t);
  return i ? i->block_elems : 0;
}
int64_t ggml_type_block_bytes(uint32_t t) {
  const GgmlTypeInfo* i = ggml_info(t);
  return i ? i->block_bytes : 0;
}

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::open(path));
  return open(std::move(file));
}

Result<std::unique_ptr<GgufFile>> GgufFile::open(std::unique_ptr<MappedFile> file) {
  std::unique_ptr<GgufFile> g(new GgufFile());
  g->file_ = std::move(file);
  const std::string& path = g->file_->path();
  Reader r(g->file_->data(), g->file_->size(), g->file_->path());
  STRATA_ASSIGN_OR_RETURN(uint32_t magic, r.read<uint32_t>("magic"));
  if (magic != kGgufMagic) return data_loss("'" + path + "' is not a GGUF file (bad magic)");
  STRATA_ASSIGN_OR_RETURN(g->version_, r.read<uint32_t>("version"));
  if (g->version_ < 2 || g->version_ > 3)
    return unimplemented("GGUF file '" + path + "' has version " + std::to_string(g->version_) +
                         "; Strata reads versions 2 and 3");
  STRATA_ASSIGN_OR_RETURN(uint64_t n_tensors, r.read<uint64_t>("tensor count"));
  STRATA_ASSIGN_OR_RETURN(uint64_t n_kv, r.read<uint64_t>("metadata count"));
  // Each tensor info takes at least 24 bytes and each key/value at least 13: counts that cannot
  // fit in the file are corruption (and must not drive allocations).
  size_t file_size = g->file_->size();
  if (n_tensors > file_size / 24 || n_kv > file_size / 13)
    return data_loss("GGUF file '" + path + "' is corrupt or truncated: header claims " +
                     std::to_string(n_tensors) + " tensors and " + std::to_string(n_kv) +
                     " metadata keys");
  for (uint64_t k = 0; k < n_kv; ++k) {
    STRATA_ASSIGN_OR_RETURN(std::string_view key, r.read_string("metadata key"));
    STRATA_ASSIGN_OR_RETURN(uint32_t type, r.read<uint32_t>("metadata type"));
    GgufValue v;
    std::string key_s(key);
    STRATA_RETURN_IF_ERROR(read_value(r, static_cast<GgufType>(type), &v, key_s, path, false));
    g->metadata_[key_s] = std::move(v);
  }
  if (const GgufValue* a = g->find("general.alignment"); a != nullptr && a->is_integer()) {
    if (a->i <= 0 || (a->i & (a->i - 1)) != 0)
      return data_loss("GGUF file '" + path + "': general.alignment must be a power of two");
    g->alignment_ = static_cast<uint64_t>(a->i);
  }
  g->tensors_.reserve(n_tensors);
  for (uint64_t t = 0; t < n_tensors; ++t) {
    GgufTensorInfo info;
    STRATA_ASSIGN_OR_RETURN(std::string_view name, r.read_string("tensor name"));
    info.name = std::string(name);
    STRATA_ASSIGN_OR_RETURN(uint32_t n_dims, r.read<uint32_t>("tensor dims"));
    if (n_dims > 8)
      return data_loss("GGUF file '" + path + "': tensor '" + info.name + "' has " +
                       std::to_string(n_dims) + " dimensions");
    for (uint32_t d = 0; d < n_dims; ++d) {
      STRATA_ASSIGN_OR_RETURN(uint64_t ne, r.read<uint64_t>("tensor shape"));
      if (ne > (1ull << 40))
        return data_loss("GGUF file '" + path + "': tensor '" + info.name + "' has a bad shape");
      info.ne.push_back(static_cast<int64_t>(ne));
    }
    STRATA_ASSIGN_OR_RETURN(info.ggml_type, r.read<uint32_t>("tensor type"));
    STRATA_ASSIGN_OR_RETURN(info.offset, r.read<uint64_t>("tensor offset"));
    g->tensor_index_[info.name] = g->tensors_.size();
    g->tensors_.push_back(std::move(info));
  }
  size_t pos = r.pos();
  g->data_offset_ = (pos + g->alignment_ - 1) / g->alignment_ * g->alignment_;
  // Bounds-check every tensor whose type we know. The arithmetic cannot overflow: an element or
  // byte count beyond 63 bits is a corrupt shape, and offsets are compared by subtraction.
  for (const auto& info : g->tensors_) {
    int64_t be = ggml_type_block_elems(info.ggml_type);
    if (be == 0) continue;  // unknown type: reported if the tensor is used
    std::optional<int64_t> numel = checked_numel(info.ne);
    int64_t n = numel.value_or(0);
    int64_t bytes = 0;
    if (!numel || __builtin_mul_overflow(n / be, ggml_type_block_bytes(info.ggml_type), &bytes))
      return data_loss("GGUF file '" + path + "': tensor '" + info.name +
                       "' has a bad shape (its size does not fit in 64 bits)");
    if (n % be != 0)
      return data_loss("GGUF file '" + path + "': tensor '" + info.name +
                       "' has a size that is not a multiple of its block size");
    if (g->data_offset_ > file_size || info.offset > file_size - g->data_offset_ ||
        static_cast<uint64_t>(bytes) > file_size - g->data_offset_ - info.offset)
      return data_loss("GGUF file '" + path + "' is truncated: tensor '" + info.name +
                       "' ends past the end of the file");
  }
  return g;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

namespace {
Status type_error(const std::string& path, std::string_view key, const char* want,
                  const GgufValue& v) {
  return invalid_argument("GGUF file '" + path + "': metadata '" + std::string(key) +
                          "' should be " + want + " but is " + gguf_type_name(v.type));
}
}  // namespace

Result<std::optional<std::string>> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::optional<std::string>();
  if (v->type != GgufType::kString) return type_error(path(), key, "a string", *v);
  return std::optional<std::string>(std::string(v->str));
}

Result<std::optional<int64_t>> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::optional<int64_t>();
  if (!v->is_integer()) return type_error(path(), key, "an integer", *v);
  return std::optional<int64_t>(v->i);
}

Result<std::optional<double>> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::optional<double>();
  if (v->is_float()) return std::optional<double>(v->f);
  if (v->is_integer()) return std::optional<double>(static_cast<double>(v->i));
  return type_error(path(), key, "a number", *v);
}

Result<std::optional<bool>> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::optional<bool>();
  if (!v->is_integer()) return type_error(path(), key, "a bool", *v);
  return std::optional<bool>(v->i != 0);
}

Result<std::vector<std::string_view>> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::vector<std::string_view>();
  if (!v->is_array() || v->elem_type != GgufType::kString)
    return type_error(path(), key, "an array of strings", *v);
  return v->strings;
}

Result<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::vector<int64_t>();
  GgufValue probe;
  probe.type = v->elem_type;
  if (!v->is_array() || !probe.is_integer())
    return type_error(path(), key, "an array of integers", *v);
  std::vector<int64_t> out(v->count);
  size_t es = scalar_size(v->elem_type);
  double unused;
  for (uint64_t k = 0; k < v->count; ++k)
    decode_scalar(v->elem_type, v->array_data + k * es, &out[k], &unused);
  return out;
}

Result<std::vector<float>> GgufFile::get_float_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::vector<float>();
  if (!v->is_array() || scalar_size(v->elem_type) == 0)
    return type_error(path(), key, "an array of numbers", *v);
  std::vector<float> out(v->count);
  size_t es = scalar_size(v->elem_type);
  GgufValue probe;
  probe.type = v->elem_type;
  for (uint64_t k = 0; k < v->count; ++k) {
    int64_t i = 0;
    double f = 0;
    decode_scalar(v->elem_type, v->array_data + k * es, &i, &f);
    out[k] = probe.is_float() ? static_cast<float>(f) : static_cast<float>(i);
  }
  return out;
}

std::string GgufFile::architecture() const {
  const GgufValue* v = find("general.architecture");
  return (v && v->type == GgufType::kString) ? std::string(v->str) : std::string();
}

bool GgufFile::has_tensor(std::string_view name) const {
  return tensor_index_.count(name) != 0;
}

Result<TensorRef> GgufFile::tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  if (it == tensor_index_.end())
    return not_found("GGUF file '" + path() + "' has no tensor '" + std::string(name) + "'");
  const GgufTensorInfo& info = tensors_[it->second];
  DType dt;
  switch (info.ggml_type) {
    case 0:
      dt = DType::kF32;
      break;
    case 1:
      dt = DType::kF16;
      break;
    case 8:
      dt = DType::kQ8_0;
      break;
    case 2:
      dt = DType::kQ4_0;
      break;
    case 3:
      dt = DType::kQ4_1;
      break;
    case 6:
      dt = DType::kQ5_0;
      break;
    case 7:
      dt = DType::kQ5_1;
      break;
    case 10:
      dt = DType::kQ2_K;
      break;
    case 11:
      dt = DType::kQ3_K;
      break;
    case 12:
      dt = DType::kQ4_K;
      break;
    case 13:
      dt = DType::kQ5_K;
      break;
    case 14:
      dt = DType::kQ6_K;
      break;
    case 20:
      dt = DType::kIQ4_NL;
      break;
    case 23:
      dt = DType::kIQ4_XS;
      break;
    case 30:
      dt = DType::kBF16;
      break;
    default:
      return unimplemented(
          "GGUF file '" + path() + "': tensor '" + info.name + "' has type " +
          ggml_type_name(info.ggml_type) +
          ", which Strata does not support (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, "
          "Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)");
  }
  TensorRef ref;
  ref.name = info.name;
  ref.dtype = dt;
  ref.shape.assign(info.ne.rbegin(), info.ne.rend());
  ref.data = file_->data() + data_offset_ + info.offset;
  ref.nbytes = static_cast<size_t>(dtype_bytes(dt, ref.numel()));
  ref.file = path();
  if (!ref.shape.empty() && ref.shape.back() % dtype_block_elems(dt) != 0)
    return data_loss("GGUF file '" + path() + "': tensor '" + info.name +
                     "' rows are not a whole number of blocks");
  return ref;
}

}  // namespace strata::io
