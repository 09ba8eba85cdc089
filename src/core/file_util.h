// Whole-file helpers and path checks.
#pragma once

#include <string>

#include "core/status.h"

namespace strata {

Result<std::string> read_file(const std::string& path);
Status write_file(const std::string& path, const std::string& data);
bool file_exists(const std::string& path);
bool is_directory(const std::string& path);
// Joins two path parts with exactly one '/'.
std::string path_join(const std::string& a, const std::string& b);

}  // namespace strata
