// A read-only memory-mapped file. Weights are used in place from the mapping (no copy unless a
// conversion is needed).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/status.h"

namespace strata::io {

class MappedFile {
 public:
  static Result<std::unique_ptr<MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace strata::io
