// safetensors reader (io/safetensors.h) over the input as a file's bytes, held in a heap copy of
// exactly that size so that AddressSanitizer sees any read past its end. Promises checked: no
// crash; an error names the file; every tensor of a file that opens lies inside the file's data
// section and has exactly the bytes its dtype and shape need (its first and last bytes are read).
#include <memory>
#include <string>
#include <string_view>

#include "fuzz_targets.h"
#include "io/safetensors.h"

namespace strata::fuzz {

int safetensors(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<io::MappedFile> mapped = io::MappedFile::from_memory("fuzz.safetensors", bytes);
  const std::byte* begin = mapped->data();
  auto file = io::SafetensorsFile::open(std::move(mapped));
  if (!file.ok()) {
    STRATA_FUZZ_CHECK(file.status().message().find("fuzz.safetensors") != std::string::npos)
        << "error without the file name: " << file.status().message();
    return 0;
  }
  volatile size_t sink = 0;
  for (const auto& [key, value] : (*file)->metadata()) sink = sink + key.size() + value.size();
  for (const auto& [name, t] : (*file)->tensors()) {
    STRATA_FUZZ_CHECK(dtype_bytes(t.dtype, t.numel()) == static_cast<int64_t>(t.nbytes))
        << "tensor '" << name << "' has " << t.nbytes << " bytes for shape " << t.shape_string();
    if (t.nbytes == 0) continue;
    const std::byte* first = t.data;
    const std::byte* last = t.data + (t.nbytes - 1);
    STRATA_FUZZ_CHECK(first >= begin + 8 && last < begin + size)
        << "tensor '" << name << "' of " << t.nbytes << " bytes lies outside the file";
    sink = sink + static_cast<size_t>(*first) + static_cast<size_t>(*last);
  }
  return 0;
}

}  // namespace strata::fuzz
