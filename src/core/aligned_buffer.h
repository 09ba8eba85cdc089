// An owning, 64-byte aligned, zero-initialised byte buffer for tensors and workspaces.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace strata {

class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 64;
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes) { resize(bytes); }
  ~AlignedBuffer() { std::free(data_); }
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  // Reallocates (contents are not kept) and zero-fills.
  void resize(size_t bytes) {
    allocate(bytes);
    if (data_ != nullptr) std::memset(data_, 0, rounded(bytes));
  }
  // A buffer whose contents are undefined until written: for a destination about to be filled in
  // full, so that its pages are first touched by the copy (not all at once by a zero fill).
  // `alignment`: a power of two, at least kAlignment.
  static AlignedBuffer uninitialized(size_t bytes, size_t alignment = kAlignment) {
    AlignedBuffer b;
    b.allocate(bytes, alignment);
    return b;
  }

  // Asks the OS to back the whole 2 MiB pages inside the buffer with transparent huge pages
  // (Linux madvise(MADV_HUGEPAGE); without effect where THP is off or unsupported). For big
  // buffers streamed in full (weights): far fewer TLB misses. Call before the pages are touched.
  void advise_huge_pages();
  static constexpr size_t kHugePage = size_t{2} << 20;
  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  template <typename T>
  T* as() {
    return reinterpret_cast<T*>(data_);
  }
  template <typename T>
  const T* as() const {
    return reinterpret_cast<const T*>(data_);
  }
  size_t size() const { return size_; }

 private:
  static size_t rounded(size_t bytes, size_t alignment = kAlignment) {
    return (bytes + alignment - 1) / alignment * alignment;
  }
  void allocate(size_t bytes, size_t alignment = kAlignment) {
    std::free(data_);
    data_ = nullptr;
    size_ = bytes;
    if (bytes == 0) return;
    data_ = static_cast<std::byte*>(std::aligned_alloc(alignment, rounded(bytes, alignment)));
    if (data_ == nullptr) std::abort();
  }

  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace strata
