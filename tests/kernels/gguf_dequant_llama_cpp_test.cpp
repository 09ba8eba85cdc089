// Strata's reference dequantization of GGUF quantized blocks (dequantize_row) against llama.cpp's
// Python gguf package (gguf-py, numpy), bit for bit. gguf_dequant_reference.py (beside this file)
// writes random blocks of one type and gguf-py's float32 values for them; the test dequantizes the
// same bytes and requires every float's bit pattern to match. gguf-py is read from a llama.cpp
// checkout beside the project ($STRATA_LLAMA_CPP, else <repo>/../llama.cpp) and run with
// $STRATA_PYTHON (default /usr/bin/python3, which must have numpy); never copied in. Without the
// checkout, the interpreter or numpy, every case skips, saying which is missing.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/file_util.h"
#include "test_util.h"

namespace strata {
namespace {

using testing::path_exists;

struct QuantCase {
  const char* ggml_name;  // GGMLQuantizationType member name
  DType dtype;
};

const QuantCase kCases[] = {
    {"Q4_0", DType::kQ4_0}, {"Q4_1", DType::kQ4_1}, {"Q5_0", DType::kQ5_0},
    {"Q5_1", DType::kQ5_1}, {"Q8_0", DType::kQ8_0}, {"IQ4_NL", DType::kIQ4_NL},
    {"Q2_K", DType::kQ2_K}, {"Q3_K", DType::kQ3_K}, {"Q4_K", DType::kQ4_K},
    {"Q5_K", DType::kQ5_K}, {"Q6_K", DType::kQ6_K}, {"IQ4_XS", DType::kIQ4_XS},
};

// gtest names a failing case by this.
void PrintTo(const QuantCase& c, std::ostream* os) {
  *os << c.ggml_name;
}

constexpr int64_t kBlocks = 512;

std::string llama_cpp_dir() {
  if (const char* env = std::getenv("STRATA_LLAMA_CPP"); env != nullptr && *env) return env;
  return std::string(STRATA_SOURCE_DIR) + "/../llama.cpp";
}

std::string gguf_py_dir() {
  return llama_cpp_dir() + "/gguf-py";
}

std::string python() {
  if (const char* env = std::getenv("STRATA_PYTHON"); env != nullptr && *env) return env;
  return "/usr/bin/python3";
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  return q + "'";
}

struct CommandResult {
  int code = -1;    // exit status, -1 when it did not exit normally
  std::string out;  // stdout and stderr
};

CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Why the comparison cannot run on this machine; empty when it can.
std::string missing_prerequisite() {
  const std::string quants = gguf_py_dir() + "/gguf/quants.py";
  if (!path_exists(quants)) {
    return "no llama.cpp checkout with gguf-py at '" + llama_cpp_dir() + "' (no " + quants +
           "); clone llama.cpp beside the repository or set STRATA_LLAMA_CPP";
  }
  if (::access(python().c_str(), X_OK) != 0) {
    return std::string("no Python interpreter at '") + python() + "' (set STRATA_PYTHON)";
  }
  CommandResult r = run_command(shell_quote(python()) + " -c 'import numpy'");
  if (r.code != 0) {
    return std::string("'") + python() +
           "' cannot import numpy (gguf-py needs it; set STRATA_PYTHON): " + r.out;
  }
  return "";
}

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl =
        std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/strata_dequant_XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string hex_bytes(const uint8_t* p, int64_t n) {
  std::ostringstream s;
  for (int64_t i = 0; i < n; ++i) {
    s << std::hex << std::setw(2) << std::setfill('0') << static_cast<int>(p[i]);
  }
  return s.str();
}

std::string describe(float v, uint32_t bits) {
  std::ostringstream s;
  s << std::setprecision(9) << v << " (0x" << std::hex << std::setw(8) << std::setfill('0') << bits
    << ")";
  return s.str();
}

class GgufDequantVsGgufPy : public ::testing::TestWithParam<QuantCase> {};

TEST_P(GgufDequantVsGgufPy, BitExact) {
  const QuantCase& c = GetParam();
  if (std::string why = missing_prerequisite(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  ASSERT_FALSE(dir.path().empty()) << "cannot create a temporary directory";
  const std::string bytes_path = dir.path() + "/blocks.bin",
                    floats_path = dir.path() + "/values.f32";
  const int seed = 1000 + static_cast<int>(c.dtype);  // fixed: a failure reproduces
  const std::string cmd =
      "PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=" + shell_quote(gguf_py_dir()) + " " +
      shell_quote(python()) + " " +
      shell_quote(testing::repo_path("tests/kernels/gguf_dequant_reference.py")) + " " +
      c.ggml_name + " " + std::to_string(kBlocks) + " " + std::to_string(seed) + " " +
      shell_quote(bytes_path) + " " + shell_quote(floats_path);
  CommandResult r = run_command(cmd);
  if (r.code == 3) GTEST_SKIP() << "gguf-py at '" << gguf_py_dir() << "': " << r.out;
  ASSERT_EQ(r.code, 0) << cmd << "\n" << r.out;

  auto bytes = read_file(bytes_path);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto floats = read_file(floats_path);
  ASSERT_TRUE(floats.ok()) << floats.status().to_string();
  const int64_t be = dtype_block_elems(c.dtype), bb = dtype_block_bytes(c.dtype);
  ASSERT_EQ(static_cast<int64_t>(bytes->size()), kBlocks * bb)
      << c.ggml_name << ": gguf-py's blocks are not " << bb << " bytes as dtype_block_bytes says";
  ASSERT_EQ(static_cast<int64_t>(floats->size()), kBlocks * be * 4)
      << c.ggml_name << ": gguf-py's blocks do not hold " << be
      << " values as dtype_block_elems says";

  const int64_t n = kBlocks * be;
  std::vector<float> got(n);
  dequantize_row(c.dtype, bytes->data(), got.data(), n);

  int64_t first = -1, mismatches = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t want;
    std::memcpy(&want, floats->data() + 4 * i, 4);
    if (f32_to_bits(got[i]) != want) {
      if (first < 0) first = i;
      ++mismatches;
    }
  }
  if (first >= 0) {
    const int64_t block = first / be;
    uint32_t want;
    std::memcpy(&want, floats->data() + 4 * first, 4);
    const auto* block_bytes = reinterpret_cast<const uint8_t*>(bytes->data()) + block * bb;
    ADD_FAILURE() << c.ggml_name << ": " << mismatches << " of " << n
                  << " values differ from gguf-py; first at block " << block << ", element "
                  << first % be << ": strata " << describe(got[first], f32_to_bits(got[first]))
                  << ", gguf-py " << describe(bits_to_f32(want), want)
                  << "\nblock bytes: " << hex_bytes(block_bytes, bb);
  }
}

std::string case_name(const ::testing::TestParamInfo<QuantCase>& info) {
  return info.param.ggml_name;
}

INSTANTIATE_TEST_SUITE_P(Types, GgufDequantVsGgufPy, ::testing::ValuesIn(kCases), case_name);

}  // namespace
}  // namespace strata
