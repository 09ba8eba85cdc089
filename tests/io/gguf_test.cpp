#include "io/gguf.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "core/file_util.h"
#include "io/writers.h"

namespace strata::io {
namespace {

std::string temp_path(const char* name) {
  char tmpl[] = "/tmp/strata_gguf_XXXXXX";
  return std::string(::mkdtemp(tmpl)) + "/" + name;
}

TEST(GgufTest, RoundTripsMetadataAndTensors) {
  std::string path = temp_path("t.gguf");
  std::vector<float> w(64 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i);
  TensorToWrite q{
      "blk.0.w", DType::kQ8_0, {3, 64}, std::string(dtype_bytes(DType::kQ8_0, 192), '\0')};
  quantize_row(DType::kQ8_0, w.data(), q.bytes.data(), 192);
  TensorToWrite h{"norm", DType::kF16, {5}, std::string(10, '\0')};
  ASSERT_TRUE(write_gguf(path,
                         {{"general.architecture", std::string("llama")},
                          {"llama.block_count", uint32_t{2}},
                          {"llama.rope.freq_base", 10000.0f},
                          {"tokenizer.ggml.tokens", std::vector<std::string>{"a", "bc", ""}},
                          {"tokenizer.ggml.scores", std::vector<float>{0.5f, -1.0f, 2.0f}},
                          {"tokenizer.ggml.token_type", std::vector<int32_t>{1, 3, 6}}},
                         {q, h})
                  .ok());
  auto g = GgufFile::open(path);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ((*g)->architecture(), "llama");
  EXPECT_EQ(*(*g)->get_int("llama.block_count").value(), 2);
  EXPECT_FLOAT_EQ(static_cast<float>(*(*g)->get_float("llama.rope.freq_base").value()), 10000.0f);
  EXPECT_FALSE((*g)->get_int("missing.key").value().has_value());
  auto toks = (*g)->get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(toks.ok());
  EXPECT_EQ(*toks, (std::vector<std::string_view>{"a", "bc", ""}));
  EXPECT_EQ(*(*g)->get_float_array("tokenizer.ggml.scores"),
            (std::vector<float>{0.5f, -1.0f, 2.0f}));
  EXPECT_EQ(*(*g)->get_int_array("tokenizer.ggml.token_type"), (std::vector<int64_t>{1, 3, 6}));
  // Wrong type is an error naming the key.
  auto wrong = (*g)->get_string("llama.block_count");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("llama.block_count"), std::string::npos);

  auto t = (*g)->tensor("blk.0.w");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->dtype, DType::kQ8_0);
  EXPECT_EQ(t->shape, (std::vector<int64_t>{3, 64}));
  EXPECT_EQ(std::memcmp(t->data, q.bytes.data(), q.bytes.size()), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data) % 32, 0u);
  EXPECT_FALSE((*g)->tensor("nope").ok());
}

TEST(GgufTest, TruncatedOrCorruptFilesGiveErrors) {
  std::string path = temp_path("t.gguf");
  TensorToWrite f{"w", DType::kF32, {4, 4}, std::string(64, '\1')};
  ASSERT_TRUE(write_gguf(path, {{"general.architecture", std::string("llama")}}, {f}).ok());
  std::string full = *read_file(path);
  for (size_t cut : {size_t{0}, size_t{3}, size_t{10}, size_t{30}, size_t{60}, full.size() - 1}) {
    ASSERT_TRUE(write_file(path, full.substr(0, cut)).ok());
    auto g = GgufFile::open(path);
    ASSERT_FALSE(g.ok()) << "cut at " << cut;
    EXPECT_NE(g.status().message().find(path), std::string::npos) << g.status().message();
  }
  // Random corruption of header bytes never crashes.
  for (size_t i = 8; i < 60 && i < full.size(); ++i) {
    std::string bad = full;
    bad[i] = static_cast<char>(0xff);
    ASSERT_TRUE(write_file(path, bad).ok());
    auto g = GgufFile::open(path);
    if (g.ok()) (void)(*g)->tensor("w");
  }
  ASSERT_TRUE(write_file(path, std::string("GGUF\x09\0\0\0", 8) + std::string(16, '\0')).ok());
  EXPECT_EQ(GgufFile::open(path).status().code(), StatusCode::kUnimplemented);
}

// A GGUF v3 file with no metadata and one tensor (ggml type, dims, offset), then `data_bytes`
// bytes of data at the 32-byte aligned data section.
std::string one_tensor_gguf(uint32_t ggml_type, const std::vector<uint64_t>& ne, uint64_t offset,
                            size_t data_bytes) {
  std::string f("GGUF", 4);
  auto put = [&](auto v) { f.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  put(uint32_t{3});
  put(uint64_t{1});  // tensors
  put(uint64_t{0});  // metadata keys
  put(uint64_t{1});
  f += "t";
  put(static_cast<uint32_t>(ne.size()));
  for (uint64_t d : ne) put(d);
  put(ggml_type);
  put(offset);
  f.resize((f.size() + 31) / 32 * 32, '\0');
  return f + std::string(data_bytes, '\x01');
}

// Found by fuzz_gguf: shapes whose element count overflows int64 were multiplied unchecked
// (undefined behaviour), also in numel() when a zero dimension hid the overflow from the open
// check; and an offset near 2^64 wrapped the end-of-tensor sum below the file size, giving a
// tensor that points outside the file.
TEST(GgufTest, ShapesAndOffsetsThatOverflowAreErrors) {
  const uint64_t big = uint64_t{1} << 40;
  for (const auto& ne : std::vector<std::vector<uint64_t>>{
           {big, big}, {big, big, big, big}, {0, big, big}, {big, big, 0}}) {
    auto g = GgufFile::open(MappedFile::from_memory("o.gguf", one_tensor_gguf(0, ne, 0, 64)));
    ASSERT_FALSE(g.ok()) << ne.size() << " dims";
    EXPECT_EQ(g.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(g.status().message().find("bad shape"), std::string::npos) << g.status().message();
  }
  // 2^62 elements of F32 take 2^64 bytes.
  auto g = GgufFile::open(
      MappedFile::from_memory("o.gguf", one_tensor_gguf(0, {uint64_t{1} << 31, 1u << 31}, 0, 64)));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("bad shape"), std::string::npos) << g.status().message();
  for (uint64_t offset : {~uint64_t{0} - 31, ~uint64_t{0} - 15, ~uint64_t{0}, uint64_t{1} << 63}) {
    g = GgufFile::open(MappedFile::from_memory("o.gguf", one_tensor_gguf(0, {4}, offset, 64)));
    ASSERT_FALSE(g.ok()) << offset;
    EXPECT_NE(g.status().message().find("ends past the end"), std::string::npos)
        << g.status().message();
  }
  // The same tensor at offset 48 of 64 data bytes is fine, and reads from the file.
  g = GgufFile::open(MappedFile::from_memory("o.gguf", one_tensor_gguf(0, {4}, 48, 64)));
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto t = (*g)->tensor("t");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->nbytes, 16u);
  EXPECT_EQ(t->data[15], std::byte{1});
  // A zero-sized tensor with reasonable dimensions is still accepted.
  g = GgufFile::open(MappedFile::from_memory("o.gguf", one_tensor_gguf(0, {0, 7}, 0, 0)));
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ((*g)->tensor("t")->numel(), 0);
}

}  // namespace
}  // namespace strata::io
