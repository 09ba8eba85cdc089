#include "kernels/backend.h"

#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>

#include "core/aligned_buffer.h"
#include "core/check.h"
#include "core/strings.h"
#include "kernels/fp8_matmul.h"
#include "kernels/kernel_impl.h"

namespace strata {
namespace {

bool cpu_has_avx2() {
  return cpu_features().avx2;
}
bool cpu_has_avx512() {
  return cpu_features().avx512;
}

struct Registry {
  std::mutex mu;
  std::deque<KernelVariantInfo> variants;  // deque: pointers stay valid as it grows
  Registry() {
    variants.push_back({"reference", "", 0, nullptr,
                        []() -> const KernelOps& { return kernels::reference::kOps; }, true});
    variants.push_back({"portable", "", 10, nullptr, kernels::portable_ops_with_fp8, false});
    variants.push_back(
        {"avx2", "AVX2, FMA, F16C", 20, cpu_has_avx2, kernels::avx2_ops_with_fp8, false});
    variants.push_back(
        {"avx512", "AVX-512 F, BW, VL and DQ", 30, cpu_has_avx512, kernels::avx512_ops, false});
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

std::string names(const std::vector<const KernelVariantInfo*>& v) {
  std::vector<std::string> out;
  for (const auto* i : v) out.push_back(i->name);
  return join(out, ", ");
}

#if defined(__x86_64__)
// F16C and AVX-VNNI straight from CPUID: clang before 17 has no "f16c" or "avxvnni" for
// __builtin_cpu_supports. Both use the YMM state that the "avx2" check already found enabled.
bool cpuid_f16c() {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;  // CPUID.1:ECX.F16C
}
bool cpuid_avx_vnni() {
  unsigned a, b, c, d;
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)) != 0;  // CPUID.(7,1):EAX
}
#endif

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = [] {
    CpuFeatures c;
#if defined(__x86_64__)
    __builtin_cpu_init();
    c.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpuid_f16c();
    c.avx512 = c.avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    c.avx512_bf16 = c.avx512 && __builtin_cpu_supports("avx512bf16");
    c.avx512_vnni = c.avx512 && __builtin_cpu_supports("avx512vnni");
    c.avx_vnni = c.avx2 && cpuid_avx_vnni();
#endif
    return c;
  }();
  return f;
}

std::string cpu_features_string() {
  const CpuFeatures& f = cpu_features();
  std::vector<std::string> out;
  if (f.avx2) out.push_back("avx2");
  if (f.avx512) out.push_back("avx512");
  if (f.avx512_bf16) out.push_back("avx512_bf16");
  if (f.avx512_vnni) out.push_back("avx512_vnni");
  if (f.avx_vnni) out.push_back("avx_vnni");
  return out.empty() ? "baseline x86-64" : join(out, " ");
}

std::vector<const KernelVariantInfo*> kernel_variants() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<const KernelVariantInfo*> out;
  for (const auto& v : r.variants) out.push_back(&v);
  return out;
}

std::vector<const KernelVariantInfo*> supported_kernel_variants(bool with_reference) {
  std::vector<const KernelVariantInfo*> out;
  for (const auto* v : kernel_variants())
    if (v->is_supported() && !v->reference) out.push_back(v);
  std::stable_sort(out.begin(), out.end(),
                   [](const auto* a, const auto* b) { return a->priority > b->priority; });
  if (with_reference)
    for (const auto* v : kernel_variants())
      if (v->reference) out.push_back(v);
  return out;
}

Status register_kernel_variant(KernelVariantInfo info) {
  if (info.name.empty() || info.ops == nullptr)
    return invalid_argument("a kernel variant needs a name and an op table");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const auto& v : r.variants)
    if (v.name == info.name)
      return invalid_argument("kernel variant '" + info.name + "' is already registered");
  r.variants.push_back(std::move(info));
  return ok_status();
}

const KernelVariantInfo* find_kernel_variant(std::string_view name) {
  for (const auto* v : kernel_variants())
    if (v->name == name) return v;
  return nullptr;
}

const KernelOps& kernel_ops(std::string_view name) {
  const KernelVariantInfo* v = find_kernel_variant(name);
  STRATA_CHECK(v != nullptr) << "no kernel variant '" << name << "'";
  STRATA_CHECK(v->is_supported()) << "kernel variant '" << name << "' needs " << v->cpu_features
                                  << ", which this CPU lacks";
  return v->ops();
}

const KernelOps& reference_kernel_ops() {
  return kernels::reference::kOps;
}

std::string default_kernel_variant() {
  auto supported = supported_kernel_variants();
  STRATA_CHECK(!supported.empty());
  return supported.front()->name;
}

Result<const KernelVariantInfo*> choose_kernel_variant(std::string_view name) {
  std::string requested(name);
  std::string source = "--kernels";
  if (requested.empty() || requested == "auto") {
    const char* env = std::getenv("STRATA_KERNELS");
    requested = env != nullptr ? env : "";
    source = "STRATA_KERNELS";
  }
  auto supported = supported_kernel_variants(/*with_reference=*/true);
  if (requested.empty() || requested == "auto") {
    STRATA_CHECK(!supported.empty());
    return supported.front();
  }
  const KernelVariantInfo* v = find_kernel_variant(requested);
  if (v == nullptr)
    return invalid_argument(source + " " + requested + ": no such kernel variant (there are " +
                            names(kernel_variants()) + "; this CPU runs " + names(supported) + ")");
  if (!v->is_supported())
    return invalid_argument(source + " " + requested + ": this CPU lacks " + v->cpu_features +
                            " (it runs " + names(supported) + ")");
  return v;
}

// The CPU allocator.
namespace {

void release_aligned(std::byte* p, size_t) {
  std::free(p);
}

void release_mapping(std::byte* p, size_t bytes) {
  ::munmap(p, bytes);
}

#if defined(__linux__) && !defined(MADV_POPULATE_WRITE)
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

// Backs every page of [p, p + bytes) with RAM now.
Status commit_pages(std::byte* p, size_t bytes) {
#if defined(MADV_POPULATE_WRITE)
  if (::madvise(p, bytes, MADV_POPULATE_WRITE) == 0) return ok_status();
  if (errno != EINVAL)
    return resource_exhausted("cannot commit " + format_bytes(static_cast<double>(bytes)) +
                              " of RAM for the KV cache (" + std::strerror(errno) +
                              "): the machine does not have it free; lower --kv-cache-memory "
                              "or --gpu-memory-utilization");
#endif
  // A kernel without MADV_POPULATE_WRITE: write to each page (an anonymous page reads as zero).
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  for (size_t off = 0; off < bytes; off += page) static_cast<volatile std::byte*>(p)[off] = {};
  return ok_status();
}

class CpuAllocator final : public DeviceAllocator {
 public:
  explicit CpuAllocator(bool commit_kv) : commit_kv_(commit_kv) {}
  Result<DeviceBuffer> allocate(size_t bytes, MemoryUse use) override {
    if (bytes == 0) return DeviceBuffer();
    if (use == MemoryUse::kKvCache) return map_kv(bytes, commit_kv_);
    const size_t align = use == MemoryUse::kWeights ? AlignedBuffer::kHugePage : 64;
    const size_t rounded = (bytes + align - 1) / align * align;
    auto* p = static_cast<std::byte*>(std::aligned_alloc(align, rounded));
    if (p == nullptr)
      return resource_exhausted("cannot allocate " + format_bytes(static_cast<double>(bytes)) +
                                " for the " + memory_use_name(use));
    if (use == MemoryUse::kWeights) {
      // Weights are streamed in full every step: whole 2 MiB pages mean far fewer TLB misses
      // (advice only; without THP the memory works the same). Contents are written by the loader.
#if defined(MADV_HUGEPAGE)
      (void)::madvise(p, rounded, MADV_HUGEPAGE);
#endif
    } else {
      std::memset(p, 0, rounded);
    }
    return DeviceBuffer(p, bytes, release_aligned);
  }
  std::string device() const override {
    return "cpu";
  }

 private:
  static Result<DeviceBuffer> map_kv(size_t bytes, bool commit) {
    // Committed pools are accounted for (no MAP_NORESERVE): the kernel may refuse the mapping
    // itself when it could never be backed.
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | (commit ? 0 : MAP_NORESERVE), -1, 0);
    if (p == MAP_FAILED)
      return resource_exhausted("cannot reserve " + format_bytes(static_cast<double>(bytes)) +
                                " for the KV cache: " + std::strerror(errno) +
                                "; lower --kv-cache-memory or --gpu-memory-utilization");
#if defined(MADV_HUGEPAGE)
    // Transparent huge pages where the OS gives them: attention walks blocks all over the cache,
    // and with 2 MiB pages far fewer of those reads miss the TLB (decode attention at 512 tokens
    // measured ~7% faster). Advice only: without THP the cache works the same.
    (void)::madvise(p, bytes, MADV_HUGEPAGE);
#endif
    if (commit) {
      Status s = commit_pages(static_cast<std::byte*>(p), bytes);
      if (!s.ok()) {
        ::munmap(p, bytes);
        return s;
      }
    }
    return DeviceBuffer(static_cast<std::byte*>(p), bytes, release_mapping);
  }

  bool commit_kv_;
};

}  // namespace

std::unique_ptr<DeviceAllocator> make_cpu_allocator(bool commit_kv_cache) {
  return std::make_unique<CpuAllocator>(commit_kv_cache);
}

Result<std::unique_ptr<CpuBackend>> CpuBackend::create(const CpuBackendOptions& options) {
  STRATA_ASSIGN_OR_RETURN(const KernelVariantInfo* v, choose_kernel_variant(options.kernels));
  if (options.threads < 0)
    return invalid_argument("--threads must be 0 (all available) or more, got " +
                            std::to_string(options.threads));
  std::unique_ptr<CpuBackend> b(new CpuBackend());
  b->variant_ = v;
  b->ops_ = &v->ops();
  b->owned_pool_ = std::make_unique<ThreadPool>(
      options.threads > 0 ? options.threads : ThreadPool::hardware_threads());
  b->pool_ = b->owned_pool_.get();
  b->owned_allocator_ = make_cpu_allocator(options.commit_kv_cache);
  b->allocator_ = b->owned_allocator_.get();
  return b;
}

CpuBackend::~CpuBackend() = default;

}  // namespace strata
