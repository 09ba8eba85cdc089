// A read-only memory-mapped file. Weights are used in place from the mapping (no copy unless a
// conversion is needed). from_memory() holds a heap copy of bytes instead, so readers can be
// driven without a file (tests, fuzzing: a read past the end of a heap copy is one that
// AddressSanitizer reports, where a mapping's page padding would hide it).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace strata::io {

class MappedFile {
 public:
  static Result<std::unique_ptr<MappedFile>> open(const std::string& path);
  // A copy of `bytes` on the heap, exactly bytes.size() long; `name` stands for the path in
  // messages.
  static std::unique_ptr<MappedFile> from_memory(std::string name, std::string_view bytes);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Drops the whole pages inside [p, p + n) from this process's memory (they are read from the
  // file again if touched later): for bytes that were copied elsewhere, so that loading does not
  // hold the file and its converted copy at once. No-op for from_memory() copies and ranges
  // outside the mapping.
  void release(const std::byte* p, size_t n) const;

 private:
  MappedFile() = default;
  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  std::unique_ptr<std::byte[]> heap_;  // from_memory(): data_ points here (nothing is mapped)
};

}  // namespace strata::io
