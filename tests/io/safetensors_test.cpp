#include "io/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "core/file_util.h"
#include "io/writers.h"

namespace strata::io {
namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/strata_io_XXXXXX";
  return ::mkdtemp(tmpl);
}

TensorToWrite f32_tensor(const std::string& name, std::vector<int64_t> shape, float start) {
  TensorToWrite t{name, DType::kF32, shape, {}};
  int64_t n = 1;
  for (auto d : shape) n *= d;
  for (int64_t i = 0; i < n; ++i) {
    float v = start + i;
    t.bytes.append(reinterpret_cast<const char*>(&v), 4);
  }
  return t;
}

TEST(SafetensorsTest, ReadsTensorsInPlace) {
  std::string dir = temp_dir();
  ASSERT_TRUE(write_safetensors(dir + "/model.safetensors",
                                {f32_tensor("a", {2, 3}, 1), f32_tensor("b", {4}, 10)},
                                {{"format", "pt"}})
                  .ok());
  auto set = SafetensorsSet::open_dir(dir);
  ASSERT_TRUE(set.ok()) << set.status().to_string();
  EXPECT_EQ((*set)->size(), 2u);
  auto a = (*set)->get("a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  float v;
  std::memcpy(&v, a->data + 4 * 5, 4);
  EXPECT_EQ(v, 6.0f);
  auto missing = (*set)->get("c");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("'c'"), std::string::npos);
}

TEST(SafetensorsTest, ShardedIndex) {
  std::string dir = temp_dir();
  ASSERT_TRUE(write_safetensors(dir + "/m-1.safetensors", {f32_tensor("x", {2}, 0)}).ok());
  ASSERT_TRUE(write_safetensors(dir + "/m-2.safetensors", {f32_tensor("y", {3}, 0)}).ok());
  ASSERT_TRUE(
      write_file(dir + "/model.safetensors.index.json",
                 R"({"metadata":{},"weight_map":{"x":"m-1.safetensors","y":"m-2.safetensors"}})")
          .ok());
  auto set = SafetensorsSet::open_dir(dir);
  ASSERT_TRUE(set.ok()) << set.status().to_string();
  EXPECT_TRUE((*set)->find("x") && (*set)->find("y"));
  EXPECT_NE((*set)->find("y")->file.find("m-2"), std::string::npos);
}

TEST(SafetensorsTest, TruncatedAndCorruptFilesGiveErrors) {
  std::string dir = temp_dir();
  std::string path = dir + "/model.safetensors";
  ASSERT_TRUE(write_safetensors(path, {f32_tensor("w", {16, 16}, 0)}).ok());
  std::string full = *read_file(path);
  // Truncate in the data section: the error names the file and the tensor.
  ASSERT_TRUE(write_file(path, full.substr(0, full.size() - 10)).ok());
  auto r = SafetensorsFile::open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("'w'"), std::string::npos);
  EXPECT_NE(r.status().message().find(path), std::string::npos);
  // Truncated header; garbage; empty.
  for (std::string bad : {full.substr(0, 20), std::string("\xff\xff\xff\xff\xff\xff\xff\x7f"),
                          std::string(), std::string(8, '\0') + "{"}) {
    ASSERT_TRUE(write_file(path, bad).ok());
    EXPECT_FALSE(SafetensorsFile::open(path).ok());
  }
  // Shape that disagrees with the byte count.
  std::string h = R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})";
  std::string f;
  uint64_t n = h.size();
  f.append(reinterpret_cast<const char*>(&n), 8);
  f += h + std::string(8, '\0');
  ASSERT_TRUE(write_file(path, f).ok());
  r = SafetensorsFile::open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("needs 12"), std::string::npos);
  // Unsupported dtype is named.
  h = R"({"w":{"dtype":"F8_E5M2","shape":[1],"data_offsets":[0,1]}})";
  f.clear();
  n = h.size();
  f.append(reinterpret_cast<const char*>(&n), 8);
  f += h + std::string(1, '\0');
  ASSERT_TRUE(write_file(path, f).ok());
  r = SafetensorsFile::open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("F8_E5M2"), std::string::npos);
}

// Found while fuzzing the readers: dimensions over 2^63 became negative int64s, and shapes
// whose element count overflows int64 were multiplied unchecked (undefined behaviour) in numel(),
// even when a zero dimension makes the tensor empty.
TEST(SafetensorsTest, ShapesThatOverflowAreErrors) {
  auto file = [](const std::string& shape, size_t data_bytes) {
    std::string h = R"({"w":{"dtype":"F32","shape":)" + shape + R"(,"data_offsets":[0,)" +
                    std::to_string(data_bytes) + "]}}";
    uint64_t n = h.size();
    std::string f(reinterpret_cast<const char*>(&n), 8);
    return MappedFile::from_memory("o.safetensors", f + h + std::string(data_bytes, '\0'));
  };
  for (const char* shape : {"[18446744073709551615]", "[9223372036854775808, 0]",
                            "[4294967296, 4294967296, 0]", "[0, 4294967296, 4294967296]",
                            "[4611686018427387904]"}) {
    auto r = SafetensorsFile::open(file(shape, 0));
    ASSERT_FALSE(r.ok()) << shape;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << shape;
    EXPECT_NE(r.status().message().find("o.safetensors"), std::string::npos);
  }
  auto r = SafetensorsFile::open(file("[0, 4294967296]", 0));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)->tensors().at("w").numel(), 0);
  r = SafetensorsFile::open(file("[2, 2]", 16));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)->tensors().at("w").nbytes, 16u);
}

}  // namespace
}  // namespace strata::io
