#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace strata::io {

Result<std::unique_ptr<MappedFile>> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return not_found("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalid_argument("'" + path + "' is not a regular file");
  }
  std::unique_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return resource_exhausted("cannot map '" + path + "': " + std::strerror(err));
    }
    f->data_ = static_cast<const std::byte*>(p);
  }
  ::close(fd);
  return f;
}

void MappedFile::release(const std::byte* p, size_t n) const {
  if (heap_ || data_ == nullptr || p < data_ || p + n > data_ + size_) return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

std::unique_ptr<MappedFile> MappedFile::from_memory(std::string name, std::string_view bytes) {
  std::unique_ptr<MappedFile> f(new MappedFile());
  f->path_ = std::move(name);
  f->size_ = bytes.size();
  f->heap_ = std::make_unique_for_overwrite<std::byte[]>(bytes.size());
  if (!bytes.empty()) std::memcpy(f->heap_.get(), bytes.data(), bytes.size());
  f->data_ = f->heap_.get();
  return f;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr && heap_ == nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
}

}  // namespace strata::io
