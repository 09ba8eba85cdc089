// The hardware files shipped in hardware/*.json, compiled into the binary at build time
// (src/plan/CMakeLists.txt generates the definition), so that built-in device names resolve in
// any working directory and in an installed binary.
#pragma once

#include <span>

namespace strata::plan {

struct EmbeddedTextFile {
  const char* name;  // the file's stem: "h200" for hardware/h200.json
  const char* text;  // its whole content
};

// Every shipped hardware file, sorted by name.
std::span<const EmbeddedTextFile> builtin_hardware_files();

}  // namespace strata::plan
