#include "core/device_memory.h"

#include <cstdlib>
#include <cstring>

#include "core/aligned_buffer.h"
#include "core/strings.h"

namespace strata {

const char* memory_use_name(MemoryUse use) {
  switch (use) {
    case MemoryUse::kWeights:
      return "weights";
    case MemoryUse::kKvCache:
      return "KV cache";
    case MemoryUse::kWorkspace:
      return "workspace";
  }
  return "?";
}

namespace {

void release_aligned(std::byte* p, size_t) {
  std::free(p);
}

class HostAllocator final : public DeviceAllocator {
 public:
  Result<DeviceBuffer> allocate(size_t bytes, MemoryUse use) override {
    const size_t align = use == MemoryUse::kWeights ? AlignedBuffer::kHugePage : 64;
    const size_t rounded = (bytes + align - 1) / align * align;
    auto* p = static_cast<std::byte*>(std::aligned_alloc(align, rounded));
    if (p == nullptr)
      return resource_exhausted("cannot allocate " + format_bytes(static_cast<double>(bytes)) +
                                " of host memory for the " + memory_use_name(use));
    if (use != MemoryUse::kWeights) std::memset(p, 0, rounded);
    return DeviceBuffer(p, bytes, release_aligned);
  }
  std::string device() const override { return "host"; }
};

}  // namespace

DeviceAllocator& host_allocator() {
  static HostAllocator a;
  return a;
}

}  // namespace strata
