#include "core/file_util.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace strata {

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    if (err == ENOENT) return not_found("cannot open '" + path + "': no such file");
    return not_found("cannot open '" + path + "': " + std::strerror(err));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return data_loss("error while reading '" + path + "'");
  return ss.str();
}

Status write_file(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return not_found("cannot write '" + path + "': " + std::strerror(errno));
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!out) return data_loss("error while writing '" + path + "'");
  return ok_status();
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string path_join(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (a.back() == '/') return a + b;
  return a + "/" + b;
}

}  // namespace strata
