// A small binary encoding for plain data that crosses a process (step plans, step results):
// fixed-width little-endian integers and floats, length-prefixed strings and vectors. The
// reader checks every length against what is left, so a truncated or corrupt message is an
// error, never a read past the end.
//
// Usage:
//   ByteWriter w;  w.u64(step);  w.str(id);  w.vec(token_ids);
//   ByteReader r(w.data());  uint64_t step = r.u64();  ...;  STRATA_RETURN_IF_ERROR(r.finish());
// After the first failed read every read returns zero/empty values and finish() reports the
// first error.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/status.h"

namespace strata {

class ByteWriter {
 public:
  template <typename T>
  void pod(T v) {
    static_assert(std::is_trivially_copyable_v<T> && std::is_arithmetic_v<T>);
    const size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &v, sizeof(T));  // x86-64 and AArch64 are little-endian
  }
  void u8(uint8_t v) { pod(v); }
  void u32(uint32_t v) { pod(v); }
  void u64(uint64_t v) { pod(v); }
  void i32(int32_t v) { pod(v); }
  void i64(int64_t v) { pod(v); }
  void f32(float v) { pod(v); }
  void boolean(bool v) { pod(static_cast<uint8_t>(v ? 1 : 0)); }
  void str(std::string_view s) {
    u64(s.size());
    out_.append(s.data(), s.size());
  }
  // A vector of arithmetic values: count, then the values.
  template <typename T>
  void vec(const std::vector<T>& v) {
    static_assert(std::is_arithmetic_v<T>);
    u64(v.size());
    const size_t at = out_.size();
    out_.resize(at + v.size() * sizeof(T));
    if (!v.empty()) std::memcpy(out_.data() + at, v.data(), v.size() * sizeof(T));
  }
  void strings(const std::vector<std::string>& v) {
    u64(v.size());
    for (const auto& s : v) str(s);
  }

  const std::string& data() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class ByteReader {
 public:
  // `what` names the message in errors ("step plan").
  explicit ByteReader(std::string_view data, std::string what = "message")
      : data_(data), what_(std::move(what)) {}

  template <typename T>
  T pod() {
    static_assert(std::is_trivially_copyable_v<T> && std::is_arithmetic_v<T>);
    T v{};
    if (!take(sizeof(T))) return v;
    std::memcpy(&v, data_.data() + pos_ - sizeof(T), sizeof(T));
    return v;
  }
  uint8_t u8() { return pod<uint8_t>(); }
  uint32_t u32() { return pod<uint32_t>(); }
  uint64_t u64() { return pod<uint64_t>(); }
  int32_t i32() { return pod<int32_t>(); }
  int64_t i64() { return pod<int64_t>(); }
  float f32() { return pod<float>(); }
  bool boolean() {
    const uint8_t b = u8();
    if (b > 1) fail("a boolean byte is " + std::to_string(b));
    return b == 1;
  }
  std::string str() {
    const uint64_t n = count(1);
    if (!take(n)) return {};
    return std::string(data_.substr(pos_ - n, n));
  }
  template <typename T>
  std::vector<T> vec() {
    static_assert(std::is_arithmetic_v<T>);
    const uint64_t n = count(sizeof(T));
    std::vector<T> v;
    if (!take(n * sizeof(T))) return v;
    v.resize(n);
    if (n > 0) std::memcpy(v.data(), data_.data() + pos_ - n * sizeof(T), n * sizeof(T));
    return v;
  }
  std::vector<std::string> strings() {
    const uint64_t n = count(sizeof(uint64_t));
    std::vector<std::string> v;
    for (uint64_t i = 0; i < n && ok(); ++i) v.push_back(str());
    return v;
  }
  // A count of elements of at least `min_elem_bytes` each: larger than what is left is an error.
  uint64_t count(size_t min_elem_bytes) {
    const uint64_t n = u64();
    if (!ok()) return 0;
    if (min_elem_bytes > 0 && n > (data_.size() - pos_) / min_elem_bytes) {
      fail("a count of " + std::to_string(n) + " is larger than the " +
           std::to_string(data_.size() - pos_) + " bytes left");
      return 0;
    }
    return n;
  }

  bool ok() const { return error_.empty(); }
  size_t remaining() const { return data_.size() - pos_; }
  // Records a semantic error found by the caller (the first error wins).
  void fail(const std::string& why) {
    if (error_.empty()) error_ = why;
  }
  // OK when every read succeeded and the whole message was read.
  Status finish() const {
    if (!error_.empty())
      return data_loss("corrupt " + what_ + " at byte " + std::to_string(pos_) + ": " + error_);
    if (pos_ != data_.size())
      return data_loss("corrupt " + what_ + ": " + std::to_string(data_.size() - pos_) +
                       " bytes left over after the last field");
    return ok_status();
  }

 private:
  bool take(uint64_t n) {
    if (!ok()) return false;
    if (n > data_.size() - pos_) {
      fail("needs " + std::to_string(n) + " bytes, " + std::to_string(data_.size() - pos_) +
           " left");
      return false;
    }
    pos_ += n;
    return true;
  }

  std::string_view data_;
  std::string what_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace strata
