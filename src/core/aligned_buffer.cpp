#include "core/aligned_buffer.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <cstdint>

namespace strata {

void AlignedBuffer::advise_huge_pages() {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  const auto begin = reinterpret_cast<uintptr_t>(data_);
  const uintptr_t first = (begin + kHugePage - 1) / kHugePage * kHugePage;
  const uintptr_t last = (begin + size_) / kHugePage * kHugePage;
  if (data_ == nullptr || last <= first) return;
  // Advice only: a kernel without THP says EINVAL, and the buffer works the same.
  (void)::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#endif
}

}  // namespace strata
