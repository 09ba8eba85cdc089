// GGUF reader (io/gguf.h) over the input as a file's bytes, held in a heap copy of exactly that
// size so that AddressSanitizer sees any read past its end. Promises checked: no crash; an error
// names the file; after a successful open, every typed lookup of every key either answers or
// errors, and every tensor Strata can compute with lies inside the file (its first and last
// bytes are read).
#include <memory>
#include <string>
#include <string_view>

#include "fuzz_targets.h"
#include "io/gguf.h"

namespace strata::fuzz {

int gguf(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<io::MappedFile> mapped = io::MappedFile::from_memory("fuzz.gguf", bytes);
  const std::byte* begin = mapped->data();
  auto file = io::GgufFile::open(std::move(mapped));
  if (!file.ok()) {
    STRATA_FUZZ_CHECK(file.status().message().find("fuzz.gguf") != std::string::npos)
        << "error without the file name: " << file.status().message();
    return 0;
  }
  const io::GgufFile& g = **file;
  (void)g.architecture();
  volatile size_t sink = 0;
  for (const auto& [key, value] : g.metadata()) {
    if (auto s = g.get_string(key); s.ok() && *s) sink = sink + (*s)->size();
    (void)g.get_int(key);
    (void)g.get_float(key);
    (void)g.get_bool(key);
    if (auto a = g.get_string_array(key); a.ok())
      for (std::string_view s : *a) sink = sink + (s.empty() ? 0 : static_cast<size_t>(s.back()));
    if (auto a = g.get_int_array(key); a.ok()) sink = sink + a->size();
    if (auto a = g.get_float_array(key); a.ok()) sink = sink + a->size();
  }
  for (const auto& info : g.tensor_infos()) {
    STRATA_FUZZ_CHECK(g.has_tensor(info.name));
    auto t = g.tensor(info.name);
    if (!t.ok()) continue;
    if (t->nbytes == 0) continue;
    const std::byte* first = t->data;
    const std::byte* last = t->data + (t->nbytes - 1);
    STRATA_FUZZ_CHECK(first >= begin && last < begin + size)
        << "tensor '" << info.name << "' of " << t->nbytes << " bytes lies outside the file";
    sink = sink + static_cast<size_t>(*first) + static_cast<size_t>(*last);
  }
  return 0;
}

}  // namespace strata::fuzz
