// Runs the built `strata` binary as a user would, for the e2e suites that drive it.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace strata::testing {

struct CliRun {
  int code = -1;    // exit status (-1 when killed by a signal)
  std::string out;  // stdout (with stderr folded in, unless split)
  std::string err;  // stderr when split
};

// `strata ARGS` (ARGS as a shell fragment). split_stderr keeps stdout and stderr apart.
inline CliRun run_strata(const std::string& args, bool split_stderr = false) {
  std::string err_path;
  std::string cmd = std::string(STRATA_BINARY_DIR) + "/strata " + args;
  if (split_stderr) {
    char tmpl[] = "/tmp/strata_cli_err_XXXXXX";
    const int fd = ::mkstemp(tmpl);
    if (fd >= 0) ::close(fd);
    err_path = tmpl;
    cmd += " 2>" + err_path;
  } else {
    cmd += " 2>&1";
  }
  CliRun r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (split_stderr) {
    std::ifstream f(err_path);
    std::stringstream ss;
    ss << f.rdbuf();
    r.err = ss.str();
    std::remove(err_path.c_str());
  }
  return r;
}

}  // namespace strata::testing
