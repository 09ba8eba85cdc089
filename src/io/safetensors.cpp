#include "io/safetensors.h"

#include <dirent.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include "core/file_util.h"
#include "core/json.h"
#include "core/strings.h"

namespace strata::io {
namespace {

bool parse_st_dtype(const std::string& s, DType* out) {
  if (s == "F32")
    *out = DType::kF32;
  else if (s == "F16")
    *out = DType::kF16;
  else if (s == "BF16")
    *out = DType::kBF16;
  else if (s == "F8_E4M3")
    *out = DType::kF8E4M3;
  else if (s == "I8")
    *out = DType::kI8;
  else if (s == "U8")
    *out = DType::kU8;
  else if (s == "F8_E8M0")  // ue8m0 scales (DeepSeek-V4): one exponent byte each, read as U8
    *out = DType::kU8;
  else if (s == "I16")
    *out = DType::kI16;
  else if (s == "I32")
    *out = DType::kI32;
  else if (s == "I64")
    *out = DType::kI64;
  else if (s == "F64")
    *out = DType::kF64;
  else if (s == "BOOL")
    *out = DType::kBool;
  else
    return false;
  return true;
}

std::vector<std::string> list_safetensors(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (ends_with(n, ".safetensors")) out.push_back(path_join(dir, n));
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::open(path));
  return open(std::move(file));
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(std::unique_ptr<MappedFile> file) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->file_ = std::move(file);
  const std::string& path = f->file_->path();
  size_t size = f->file_->size();
  if (size < 8) return data_loss("safetensors file '" + path + "' is truncated (no header)");
  uint64_t header_len;
  std::memcpy(&header_len, f->file_->data(), 8);
  if (header_len > size - 8 || header_len > (100u << 20))
    return data_loss("safetensors file '" + path + "' is truncated or corrupt: header of " +
                     std::to_string(header_len) + " bytes in a file of " + std::to_string(size));
  std::string header(reinterpret_cast<const char*>(f->file_->data() + 8), header_len);
  auto parsed = parse_json(header, "the header of safetensors file '" + path + "'");
  if (!parsed.ok()) return data_loss(parsed.status().message());
  const Json& j = *parsed;
  if (!j.is_object()) return data_loss("safetensors file '" + path + "': header is not an object");
  const std::byte* data_start = f->file_->data() + 8 + header_len;
  size_t data_size = size - 8 - header_len;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (it->is_object())
        for (auto m = it->begin(); m != it->end(); ++m)
          if (m->is_string()) f->metadata_[m.key()] = m->get<std::string>();
      continue;
    }
    const Json& t = *it;
    auto bad = [&](const std::string& why) {
      return data_loss("safetensors file '" + path + "': tensor '" + it.key() + "' " + why);
    };
    if (!t.is_object() || !t.contains("dtype") || !t.contains("shape") ||
        !t.contains("data_offsets") || !t["dtype"].is_string() || !t["shape"].is_array() ||
        !t["data_offsets"].is_array() || t["data_offsets"].size() != 2)
      return bad("has a malformed header entry");
    TensorRef ref;
    ref.name = it.key();
    ref.file = path;
    std::string dt = t["dtype"].get<std::string>();
    if (!parse_st_dtype(dt, &ref.dtype))
      return unimplemented("safetensors file '" + path + "': tensor '" + it.key() + "' has dtype " +
                           dt + ", which Strata does not support");
    for (const auto& d : t["shape"]) {
      if (!d.is_number_unsigned()) return bad("has a non-integer shape");
      if (d.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return bad("has a shape dimension over 2^63");
      ref.shape.push_back(d.get<int64_t>());
    }
    std::optional<int64_t> numel = checked_numel(ref.shape);
    std::optional<int64_t> need = numel ? checked_bytes(ref.dtype, *numel) : std::nullopt;
    if (!need)
      return bad("has a bad shape " + ref.shape_string() + " (its size does not fit in 64 bits)");
    const auto& off = t["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return bad("has bad data_offsets");
    uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    if (b > e || e > data_size)
      return data_loss("safetensors file '" + path + "' is truncated: tensor '" + it.key() +
                       "' ends at byte " + std::to_string(e) + " of a data section of " +
                       std::to_string(data_size));
    ref.data = data_start + b;
    ref.nbytes = e - b;
    if (static_cast<uint64_t>(*need) != ref.nbytes)
      return bad("has " + std::to_string(ref.nbytes) + " bytes but shape " + ref.shape_string() +
                 " of " + dtype_name(ref.dtype) + " needs " + std::to_string(*need));
    f->tensors_[ref.name] = std::move(ref);
  }
  return f;
}

Result<std::unique_ptr<SafetensorsSet>> SafetensorsSet::open_files(
    const std::vector<std::string>& paths) {
  auto set = std::make_unique<SafetensorsSet>();
  for (const auto& p : paths) {
    STRATA_ASSIGN_OR_RETURN(auto f, SafetensorsFile::open(p));
    for (const auto& [name, ref] : f->tensors()) {
      if (set->index_.count(name))
        return data_loss("tensor '" + name + "' appears in two files: '" + set->index_[name]->file +
                         "' and '" + p + "'");
      set->index_[name] = &ref;
    }
    set->files_.push_back(std::move(f));
  }
  set->source_ = paths.size() == 1 ? paths[0] : (paths.empty() ? "" : paths[0] + " (+ shards)");
  return set;
}

Result<std::unique_ptr<SafetensorsSet>> SafetensorsSet::open_dir(const std::string& dir) {
  std::string index_path = path_join(dir, "model.safetensors.index.json");
  std::vector<std::string> files;
  if (file_exists(index_path)) {
    STRATA_ASSIGN_OR_RETURN(Json idx, read_json_file(index_path));
    if (!idx.contains("weight_map") || !idx["weight_map"].is_object())
      return data_loss("'" + index_path + "' has no weight_map object");
    std::set<std::string> shards;
    for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end(); ++it) {
      if (!it->is_string()) return data_loss("'" + index_path + "': bad weight_map entry");
      shards.insert(it->get<std::string>());
    }
    for (const auto& s : shards) {
      if (s.find('/') != std::string::npos)
        return data_loss("'" + index_path + "' names a shard outside the directory: " + s);
      std::string p = path_join(dir, s);
      if (!file_exists(p))
        return not_found("shard '" + p + "' listed in '" + index_path + "' is missing");
      files.push_back(p);
    }
  } else if (file_exists(path_join(dir, "model.safetensors"))) {
    files.push_back(path_join(dir, "model.safetensors"));
  } else {
    files = list_safetensors(dir);
  }
  if (files.empty()) return not_found("no .safetensors files in '" + dir + "'");
  STRATA_ASSIGN_OR_RETURN(auto set, open_files(files));
  set->source_ = dir;
  return set;
}

const TensorRef* SafetensorsSet::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

Result<TensorRef> SafetensorsSet::get(std::string_view name) const {
  const TensorRef* r = find(name);
  if (r == nullptr)
    return not_found("checkpoint '" + source_ + "' has no tensor '" + std::string(name) + "'");
  return *r;
}

std::vector<std::string> SafetensorsSet::names() const {
  std::vector<std::string> out;
  for (const auto& [n, r] : index_) out.push_back(n);
  return out;
}

bool has_safetensors(const std::string& dir) {
  return !list_safetensors(dir).empty();
}

}  // namespace strata::io
