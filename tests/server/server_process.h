// Runs the real `strata serve` binary as a child process on a free loopback port, collects its
// output, and stops it (SIGTERM, then SIGKILL) when destroyed.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace strata::server::testing {

class ServerProcess {
 public:
  // Starts `strata serve <args>` (with --port 0 added unless given); waits for the listening
  // line. ok() is false when the binary exited or did not start listening in time.
  // `ignore_sigint`: start it as a shell starts a background job, with SIGINT ignored.
  // `env`: variables set in the child (e.g. STRATA_DEBUG_STEP_LIMIT_FILE).
  explicit ServerProcess(std::vector<std::string> args, double start_timeout_s = 120,
                         bool ignore_sigint = false,
                         std::vector<std::pair<std::string, std::string>> env = {}) {
    std::string bin = std::string(STRATA_BINARY_DIR) + "/strata";
    std::vector<std::string> argv = {bin, "serve"};
    argv.insert(argv.end(), args.begin(), args.end());
    // The child's environment: ours with `env` applied (built before fork, used by execve).
    std::vector<std::string> envs;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string kv = *e;
      bool replaced = false;
      for (const auto& [k, v] : env) replaced = replaced || kv.rfind(k + "=", 0) == 0;
      if (!replaced) envs.push_back(kv);
    }
    for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
    std::vector<char*> cenv;
    for (auto& e : envs) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    int fds[2];
    if (::pipe(fds) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], 1);
      ::dup2(fds[1], 2);
      ::close(fds[0]);
      ::close(fds[1]);
      if (ignore_sigint) ::signal(SIGINT, SIG_IGN);
      ::execve(bin.c_str(), cargv.data(), cenv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    fd_ = fds[0];
    reader_ = std::thread([this] {
      char buf[4096];
      for (;;) {
        ssize_t n = ::read(fd_, buf, sizeof(buf));
        if (n <= 0) break;
        std::lock_guard<std::mutex> lock(mu_);
        out_.append(buf, static_cast<size_t>(n));
      }
    });
    static const std::regex kListen("listening on http://[^:]+:([0-9]+)");
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(start_timeout_s);
    while (std::chrono::steady_clock::now() < end && running()) {
      std::smatch m;
      std::string o = output();
      if (std::regex_search(o, m, kListen)) {
        port_ = std::stoi(m[1]);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  ~ServerProcess() {
    if (pid_ > 0 && exit_code_ == kRunning) {
      ::kill(pid_, SIGKILL);
      wait_exit(120);
    }
    if (reader_.joinable()) reader_.join();
    if (fd_ >= 0) ::close(fd_);
  }

  bool ok() const { return port_ > 0; }
  int port() const { return port_; }
  std::string base() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string output() {
    std::lock_guard<std::mutex> lock(mu_);
    return out_;
  }
  void signal(int sig) { ::kill(pid_, sig); }

  bool running() {
    if (exit_code_ != kRunning) return false;
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      if (reader_.joinable()) reader_.join();  // the rest of its output, up to EOF
      return false;
    }
    return true;
  }
  // Waits for the process to exit; its exit code, or -1 on timeout.
  int wait_exit(double timeout_s) {
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (running() && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return exit_code_ == kRunning ? -1 : exit_code_;
  }
  // Waits until the output contains `text` (the deadline is a safety net, not a measure).
  bool wait_output(const std::string& text, double timeout_s = 120) {
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < end) {
      if (output().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return output().find(text) != std::string::npos;
  }

 private:
  static constexpr int kRunning = -1000;
  pid_t pid_ = -1;
  int fd_ = -1;
  int port_ = 0;
  int exit_code_ = kRunning;
  std::thread reader_;
  std::mutex mu_;
  std::string out_;
};

// The file STRATA_DEBUG_STEP_LIMIT_FILE names (docs/server.md): the server's engine runs no step
// beyond the number it holds. Written atomically (a temporary file renamed over it); removed at
// the end of the scope.
class StepLimitFile {
 public:
  explicit StepLimitFile(const std::string& name, int64_t limit)
      : path_(std::string(::testing::TempDir()) + "/strata_step_limit_" + name + "_" +
              std::to_string(::getpid())) {
    set(limit);
  }
  ~StepLimitFile() { std::remove(path_.c_str()); }
  StepLimitFile(const StepLimitFile&) = delete;
  StepLimitFile& operator=(const StepLimitFile&) = delete;

  const std::string& path() const { return path_; }
  std::pair<std::string, std::string> env() const {
    return {"STRATA_DEBUG_STEP_LIMIT_FILE", path_};
  }
  void set(int64_t limit) {
    const std::string tmp = path_ + ".tmp";
    {
      std::ofstream f(tmp, std::ios::trunc);
      f << limit << "\n";
    }
    std::rename(tmp.c_str(), path_.c_str());
  }

 private:
  std::string path_;
};

// Arguments that serve the tiny dummy model on a free loopback port with a small KV cache.
inline std::vector<std::string> tiny_serve_args(std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {std::string(STRATA_SOURCE_DIR) + "/models/strata-tiny",
                                "--load-format",
                                "dummy",
                                "--host",
                                "127.0.0.1",
                                "--port",
                                "0",
                                "--kv-cache-memory",
                                "16MiB",
                                "--max-model-len",
                                "512",
                                "--threads",
                                "1"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

}  // namespace strata::server::testing
