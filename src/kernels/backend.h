// A Backend is one device's kernels, compute threads and memory (DESIGN.md section 8). The CPU
// backend picks a kernel variant by name from a registry, at run time, from the CPU's features;
// each variant is compiled with its own flags (*_avx2.cpp with AVX2/FMA/F16C), so one binary runs
// correctly on any x86-64 machine. Weights and the KV cache are allocated through the backend's
// allocator. A CUDA or ARM backend is another Backend with its own variants and allocator; model
// code only ever calls backend.ops().
//
//   auto backend = CpuBackend::create({.kernels = "auto", .threads = 2});
//   model->forward(batch, kv, (*backend)->ops(), logits);
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/device_memory.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"

namespace strata {

// What this CPU can run (cpuid, checked once).
struct CpuFeatures {
  bool avx2 = false;    // with FMA and F16C
  bool avx512 = false;  // F, BW, VL, DQ
  bool avx512_bf16 = false;
  bool avx512_vnni = false;
  bool avx_vnni = false;
};
const CpuFeatures& cpu_features();
// "avx2 avx512 avx512_bf16 ..." for logs.
std::string cpu_features_string();

// One registered kernel table.
struct KernelVariantInfo {
  std::string name;               // "avx2"; what --kernels and STRATA_KERNELS take
  std::string cpu_features;       // what it needs, for messages ("AVX2, FMA, F16C")
  int priority = 0;               // the supported variant with the highest priority is the default
  bool (*supported)() = nullptr;  // run-time check (cpuid); null: always
  const KernelOps& (*ops)() = nullptr;  // the table (only called when supported)
  bool reference = false;  // the plain reference: a test baseline, never chosen by default
  bool is_supported() const { return supported == nullptr || supported(); }
};

// Registered variants (built-ins first: reference, portable, avx2), whether or not this CPU
// supports them. Thread-safe; the returned pointers stay valid.
std::vector<const KernelVariantInfo*> kernel_variants();
// The supported ones, fastest first; the reference last, and only when `with_reference`.
std::vector<const KernelVariantInfo*> supported_kernel_variants(bool with_reference = false);
// Adds a variant (tests, plug-ins). Errors when the name is taken or the info incomplete.
Status register_kernel_variant(KernelVariantInfo info);
const KernelVariantInfo* find_kernel_variant(std::string_view name);
// The table of a registered, supported variant; aborts otherwise (tests and tools that already
// checked). Users' choices go through choose_kernel_variant().
const KernelOps& kernel_ops(std::string_view name);
const KernelOps& reference_kernel_ops();
// The fastest supported variant's name (ignores STRATA_KERNELS): what tests compare with the
// reference.
std::string default_kernel_variant();
// `name` "" or "auto": STRATA_KERNELS when set, else the fastest supported variant. Errors name the
// variants there are and which this CPU supports.
Result<const KernelVariantInfo*> choose_kernel_variant(std::string_view name);

class Backend {
 public:
  virtual ~Backend() = default;
  // "cpu:avx2" (device and kernel variant), for logs and benchmarks.
  virtual std::string name() const = 0;
  virtual const KernelVariantInfo& variant() const = 0;
  const KernelOps& ops() const { return *ops_; }
  ThreadPool& pool() { return *pool_; }
  DeviceAllocator& allocator() { return *allocator_; }

 protected:
  const KernelOps* ops_ = nullptr;
  ThreadPool* pool_ = nullptr;
  DeviceAllocator* allocator_ = nullptr;
};

struct CpuBackendOptions {
  std::string kernels = "auto";  // a variant name, or auto
  int threads = 0;               // compute threads; 0: all available
  bool commit_kv_cache = true;   // see make_cpu_allocator
};

class CpuBackend final : public Backend {
 public:
  static Result<std::unique_ptr<CpuBackend>> create(const CpuBackendOptions& options);
  ~CpuBackend() override;
  std::string name() const override { return "cpu:" + variant_->name; }
  const KernelVariantInfo& variant() const override { return *variant_; }

 private:
  CpuBackend() = default;
  const KernelVariantInfo* variant_ = nullptr;
  std::unique_ptr<ThreadPool> owned_pool_;
  std::unique_ptr<DeviceAllocator> owned_allocator_;
};

// The CPU backend's allocator: weights 2 MiB aligned on transparent huge pages; the KV cache an
// anonymous mapping on huge pages; workspaces zeroed.
//
// With `commit_kv_cache` the KV mapping is committed when allocated: every page is backed by RAM
// at once (MADV_POPULATE_WRITE, or a write to each page on kernels before 5.14), so a pool the
// machine cannot hold fails there with kResourceExhausted instead of being killed later when
// requests fill it. Without, pages are backed on first use (quicker to start, for tests and
// short benchmarks).
std::unique_ptr<DeviceAllocator> make_cpu_allocator(bool commit_kv_cache = true);

}  // namespace strata
