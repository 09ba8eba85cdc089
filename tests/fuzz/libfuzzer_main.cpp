// libFuzzer's entry point for one target, chosen at build time (-DSTRATA_FUZZ_ENTRY=<name>).
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return strata::fuzz::STRATA_FUZZ_ENTRY(data, size);
}
