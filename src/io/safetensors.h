// safetensors reader: one file, or a set of files (sharded checkpoints with
// model.safetensors.index.json, or every *.safetensors in a directory). Tensors are used in place
// from the mappings; header offsets and sizes are checked against each file.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "io/mapped_file.h"
#include "io/tensor_ref.h"

namespace strata::io {

class SafetensorsFile {
 public:
  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  // Reads an already opened file (MappedFile::from_memory for bytes that are not on disk).
  static Result<std::unique_ptr<SafetensorsFile>> open(std::unique_ptr<MappedFile> file);
  const std::string& path() const { return file_->path(); }
  const std::map<std::string, TensorRef, std::less<>>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  std::unique_ptr<MappedFile> file_;
  std::map<std::string, TensorRef, std::less<>> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All the tensors of a checkpoint directory.
class SafetensorsSet {
 public:
  // Opens model.safetensors.index.json's shards when present, else model.safetensors, else every
  // *.safetensors file in `dir` (sorted by name).
  static Result<std::unique_ptr<SafetensorsSet>> open_dir(const std::string& dir);
  static Result<std::unique_ptr<SafetensorsSet>> open_files(const std::vector<std::string>& paths);

  const TensorRef* find(std::string_view name) const;
  Result<TensorRef> get(std::string_view name) const;  // error names the directory and tensor
  std::vector<std::string> names() const;
  size_t size() const { return index_.size(); }
  const std::string& source() const { return source_; }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorRef*, std::less<>> index_;
  std::string source_;
};

// True when `dir` holds safetensors weights.
bool has_safetensors(const std::string& dir);

}  // namespace strata::io
