// Memory that a backend's kernels work on (host RAM for the CPU backend; a GPU backend would hand
// out device memory through the same interface). Weights and the KV cache are allocated through
// a backend's DeviceAllocator, never with malloc in model or cache code, so they live where the
// kernels that read them run.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "core/status.h"

namespace strata {

// What a buffer is for: the allocator may place and back each kind differently (the CPU backend
// puts weights and the KV cache on transparent huge pages).
enum class MemoryUse {
  kWeights,    // written once at load, then streamed; contents undefined until written
  kKvCache,    // zero-filled; committed at allocation where the allocator can
  kWorkspace,  // zero-filled scratch
};
const char* memory_use_name(MemoryUse use);

// An owning, move-only handle to one allocation (64-byte aligned at least).
class DeviceBuffer {
 public:
  using Release = void (*)(std::byte* data, size_t bytes);
  DeviceBuffer() = default;
  DeviceBuffer(std::byte* data, size_t bytes, Release release)
      : data_(data), size_(bytes), release_(release) {}
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        release_(std::exchange(o.release_, nullptr)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      release_ = std::exchange(o.release_, nullptr);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return data_ == nullptr; }
  void reset() {
    if (data_ != nullptr && release_ != nullptr) release_(data_, size_);
    data_ = nullptr;
    size_ = 0;
    release_ = nullptr;
  }

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  Release release_ = nullptr;
};

class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  // `bytes` > 0. Errors (kResourceExhausted) say how much was asked for and for what.
  virtual Result<DeviceBuffer> allocate(size_t bytes, MemoryUse use) = 0;
  // "cpu", "cuda:0", ...
  virtual std::string device() const = 0;
};

// Plain host memory (aligned_alloc, 2 MiB aligned for weights, zeroed for the other uses): what
// code without a backend (tests, tools) allocates through.
DeviceAllocator& host_allocator();

}  // namespace strata
