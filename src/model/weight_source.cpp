#include "model/weight_source.h"

#include <cmath>
#include <cstring>
#include <map>

#include "core/rng.h"

namespace strata {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

class SafetensorsSource : public WeightSource {
 public:
  explicit SafetensorsSource(std::unique_ptr<io::SafetensorsSet> set) : set_(std::move(set)) {}
  TensorNaming naming() const override { return TensorNaming::kHuggingFace; }
  std::string describe() const override { return set_->source(); }
  bool has(const std::string& name) const override { return set_->find(name) != nullptr; }
  Result<io::TensorRef> get(const std::string& name, const std::vector<int64_t>& shape,
                            DummyInit) override {
    STRATA_ASSIGN_OR_RETURN(io::TensorRef t, set_->get(name));
    STRATA_RETURN_IF_ERROR(check_shape(t, shape, set_->source()));
    return t;
  }

 private:
  std::unique_ptr<io::SafetensorsSet> set_;
};

class GgufSource : public WeightSource {
 public:
  explicit GgufSource(std::shared_ptr<io::GgufFile> g) : g_(std::move(g)) {}
  TensorNaming naming() const override { return TensorNaming::kGguf; }
  std::string describe() const override { return g_->path(); }
  bool has(const std::string& name) const override { return g_->has_tensor(name); }
  Result<io::TensorRef> get(const std::string& name, const std::vector<int64_t>& shape,
                            DummyInit) override {
    STRATA_ASSIGN_OR_RETURN(io::TensorRef t, g_->tensor(name));
    STRATA_RETURN_IF_ERROR(check_shape(t, shape, g_->path()));
    return t;
  }
  void release(const io::TensorRef& t) override { g_->release(t); }

 private:
  std::shared_ptr<io::GgufFile> g_;
};

class DummySource : public WeightSource {
 public:
  DummySource(uint64_t seed, DType dtype, double stddev)
      : seed_(seed), dtype_(dtype), stddev_(stddev) {}
  TensorNaming naming() const override { return TensorNaming::kHuggingFace; }
  std::string describe() const override { return "dummy weights"; }
  bool has(const std::string&) const override { return true; }
  Result<io::TensorRef> get(const std::string& name, const std::vector<int64_t>& shape,
                            DummyInit init) override {
    return generate(name, shape, 0, shape.empty() ? 1 : shape[0], init);
  }
  Result<io::TensorRef> get_rows(const std::string& name, const std::vector<int64_t>& shape,
                                 int64_t begin, int64_t end, DummyInit init) override {
    if (shape.empty() || begin < 0 || end > shape[0] || begin > end)
      return invalid_argument("rows [" + std::to_string(begin) + ", " + std::to_string(end) +
                              ") of dummy tensor '" + name + "' of shape " + shape_str(shape));
    return generate(name, shape, begin, end, init);
  }
  Result<io::TensorRef> peek(const std::string& name, const std::vector<int64_t>& shape) override {
    io::TensorRef t;
    t.name = name;
    t.shape = shape;
    t.dtype = dtype_;
    t.file = "dummy";
    return t;
  }
  void release_generated() override { buffers_.clear(); }

 private:
  // Rows [begin, end) of the tensor `name` of `shape`: the values of the whole tensor's stream
  // (one draw per element, in row-major order) at those rows; the draws before them are skipped.
  Result<io::TensorRef> generate(const std::string& name, const std::vector<int64_t>& shape,
                                 int64_t begin, int64_t end, DummyInit init) {
    io::TensorRef t;
    t.name = name;
    t.shape = shape;
    t.dtype = dtype_;
    t.file = "dummy";
    int64_t row = 1;
    for (size_t i = 1; i < shape.size(); ++i) row *= shape[i];
    if (!shape.empty()) t.shape[0] = end - begin;
    const int64_t first = begin * row, n = t.numel();
    if (first % dtype_block_elems(dtype_) != 0)
      return invalid_argument("rows from " + std::to_string(begin) + " of dummy tensor '" + name +
                              "' do not start on a " + dtype_name(dtype_) + " block");
    auto& buf = buffers_[name];
    buf.resize(static_cast<size_t>(dtype_bytes(dtype_, n)));
    uint64_t h = seed_ ^ 0x9e3779b97f4a7c15ull;
    for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    Rng rng(h);
    // Uniform in [-a, a] has standard deviation a / sqrt(3).
    const float a = static_cast<float>(stddev_ * std::sqrt(3.0));
    if (init == DummyInit::kNormal)
      for (int64_t i = 0; i < first; ++i) rng.next_u64();
    // Chunks of whole blocks, so a block-quantized dtype quantizes the same blocks as the whole
    // tensor does.
    std::vector<float> tmp(static_cast<size_t>(std::min<int64_t>(n, 1 << 16)));
    for (int64_t off = 0; off < n; off += static_cast<int64_t>(tmp.size())) {
      int64_t len = std::min<int64_t>(static_cast<int64_t>(tmp.size()), n - off);
      for (int64_t i = 0; i < len; ++i)
        tmp[i] = init == DummyInit::kOnes    ? 1.0f
                 : init == DummyInit::kZeros ? 0.0f
                                             : rng.uniform(-a, a);
      quantize_row(dtype_, tmp.data(), buf.data() + dtype_bytes(dtype_, off), len);
    }
    t.data = buf.data();
    t.nbytes = buf.size();
    return t;
  }

  uint64_t seed_;
  DType dtype_;
  double stddev_;
  std::map<std::string, AlignedBuffer> buffers_;
};

// Dummy weights of an AWQ / GPTQ checkpoint of the config (weight_source.h): the layers such a
// checkpoint quantizes (int_quantizes_layer()) are served as `.qweight/.qzeros/.scales(/.g_idx)`
// in the format's dtypes, shaped as the loader asks for them; everything else comes from the
// float dummy source.
class IntQuantDummySource : public WeightSource {
  enum class Part { kNone, kWeight, kQweight, kQzeros, kScales, kGidx };

 public:
  IntQuantDummySource(std::unique_ptr<WeightSource> floats, const IntQuantization& quant,
                      uint64_t seed, double stddev)
      : floats_(std::move(floats)), quant_(quant), seed_(seed), stddev_(stddev) {
    set_int_quant(quant);
  }
  TensorNaming naming() const override { return TensorNaming::kHuggingFace; }
  std::string describe() const override { return "dummy " + quant_.method + " weights"; }
  bool has(const std::string& name) const override {
    std::string base;
    const Part p = part(name, &base);
    if (p == Part::kWeight) return false;  // stored as qweight & co. instead
    if (p != Part::kNone) return true;
    // The float dummy source has every name; a layer the checkpoint keeps float has no
    // quantized parts.
    return !int_suffix(name) && floats_->has(name);
  }
  Result<io::TensorRef> get(const std::string& name, const std::vector<int64_t>& shape,
                            DummyInit init) override {
    std::string base;
    const Part p = part(name, &base);
    if (p == Part::kNone || p == Part::kWeight) return floats_->get(name, shape, init);
    return generate(name, shape, p);
  }
  Result<io::TensorRef> get_rows(const std::string& name, const std::vector<int64_t>& shape,
                                 int64_t begin, int64_t end, DummyInit init) override {
    std::string base;
    const Part p = part(name, &base);
    if (p == Part::kNone || p == Part::kWeight)
      return floats_->get_rows(name, shape, begin, end, init);
    return WeightSource::get_rows(name, shape, begin, end, init);
  }

 private:
  Result<io::TensorRef> generate(const std::string& name, const std::vector<int64_t>& shape,
                                 Part p) {
    io::TensorRef t = describe_part(name, shape, p);
    auto& buf = buffers_[name];
    buf.resize(static_cast<size_t>(dtype_bytes(t.dtype, t.numel())));
    const int per_word = 32 / quant_.bits;
    if (p == Part::kQweight) {
      uint64_t h = seed_ ^ 0x5851f42d4c957f2dull;
      for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
      Rng rng(h);
      for (int64_t i = 0; i < t.numel(); ++i) {
        const uint32_t v = static_cast<uint32_t>(rng.next_u64());
        std::memcpy(buf.data() + 4 * i, &v, 4);
      }
    } else if (p == Part::kQzeros) {
      // Every zero point in the middle of the code range (GPTQ v1 stores it minus one).
      const uint32_t mid = (1u << (quant_.bits - 1)) - (quant_.zeros_plus_one ? 1 : 0);
      uint32_t v = 0;
      for (int i = 0; i < per_word; ++i) v |= mid << (quant_.bits * i);
      for (int64_t i = 0; i < t.numel(); ++i) std::memcpy(buf.data() + 4 * i, &v, 4);
    } else if (p == Part::kScales) {
      // Codes uniform over 2^bits values around the zero: a standard deviation of
      // 2^bits / sqrt(12) steps, scaled to the config's initializer range.
      const uint16_t sc = f32_to_f16(static_cast<float>(stddev_ * std::sqrt(12.0)) /
                                     static_cast<float>(1 << quant_.bits));
      for (int64_t i = 0; i < t.numel(); ++i) std::memcpy(buf.data() + 2 * i, &sc, 2);
    } else {
      // g_idx: contiguous groups, or with act-order (desc_act) the groups in reverse input order,
      // as an act-order permutation leaves them not contiguous.
      const int64_t k = t.numel();
      const int64_t group = quant_.group_size < 0 ? k : quant_.group_size;
      for (int64_t c = 0; c < k; ++c) {
        const int32_t g = static_cast<int32_t>((quant_.desc_act ? k - 1 - c : c) / group);
        std::memcpy(buf.data() + 4 * c, &g, 4);
      }
    }
    t.data = buf.data();
    t.nbytes = buf.size();
    return t;
  }

 public:
  Result<io::TensorRef> peek(const std::string& name, const std::vector<int64_t>& shape) override {
    std::string base;
    const Part p = part(name, &base);
    if (p == Part::kNone || p == Part::kWeight) return floats_->peek(name, shape);
    return describe_part(name, shape, p);
  }
  void release(const io::TensorRef& t) override {
    if (buffers_.erase(t.name) == 0) floats_->release(t);
  }
  void release_generated() override {
    buffers_.clear();
    floats_->release_generated();
  }

 private:
  // Which part of a quantized layer `name` is (kNone: not one); its layer into *base.
  Part part(const std::string& name, std::string* base) const {
    static const std::pair<const char*, Part> kSuffixes[] = {{".weight", Part::kWeight},
                                                             {".qweight", Part::kQweight},
                                                             {".qzeros", Part::kQzeros},
                                                             {".scales", Part::kScales},
                                                             {".g_idx", Part::kGidx}};
    for (const auto& [suffix, p] : kSuffixes) {
      const size_t n = std::strlen(suffix);
      if (name.size() <= n || name.compare(name.size() - n, n, suffix) != 0) continue;
      if (p == Part::kGidx && quant_.method != "gptq") return Part::kNone;
      *base = name.substr(0, name.size() - n);
      return int_quantizes_layer(quant_, *base) ? p : Part::kNone;
    }
    return Part::kNone;
  }
  static bool int_suffix(const std::string& name) {
    for (const char* suffix : {".qweight", ".qzeros", ".scales", ".g_idx"}) {
      const size_t n = std::strlen(suffix);
      if (name.size() > n && name.compare(name.size() - n, n, suffix) == 0) return true;
    }
    return false;
  }
  io::TensorRef describe_part(const std::string& name, const std::vector<int64_t>& shape,
                              Part p) const {
    io::TensorRef t;
    t.name = name;
    t.shape = shape;
    t.dtype = p == Part::kScales ? DType::kF16 : DType::kI32;
    t.file = "dummy";
    return t;
  }

  std::unique_ptr<WeightSource> floats_;
  IntQuantization quant_;
  uint64_t seed_;
  double stddev_;
  std::map<std::string, AlignedBuffer> buffers_;
};

}  // namespace

Result<io::TensorRef> WeightSource::get_rows(const std::string& name,
                                             const std::vector<int64_t>& shape, int64_t begin,
                                             int64_t end, DummyInit init) {
  STRATA_ASSIGN_OR_RETURN(io::TensorRef t, get(name, shape, init));
  return tensor_rows(t, begin, end, describe());
}

Result<io::TensorRef> tensor_rows(const io::TensorRef& t, int64_t begin, int64_t end,
                                  const std::string& source) {
  if (t.shape.empty() || begin < 0 || end > t.shape[0] || begin > end)
    return invalid_argument("rows [" + std::to_string(begin) + ", " + std::to_string(end) +
                            ") of tensor '" + t.name + "' in '" + source + "' of shape " +
                            shape_str(t.shape));
  if (begin == 0 && end == t.shape[0]) return t;
  int64_t row = 1;
  for (size_t i = 1; i < t.shape.size(); ++i) row *= t.shape[i];
  if ((begin * row) % dtype_block_elems(t.dtype) != 0 ||
      (end * row) % dtype_block_elems(t.dtype) != 0)
    return unimplemented("rows [" + std::to_string(begin) + ", " + std::to_string(end) +
                         ") of tensor '" + t.name + "' in '" + source + "' (" +
                         dtype_name(t.dtype) + ") do not fall on whole blocks");
  io::TensorRef out = t;
  out.shape[0] = end - begin;
  out.data = t.data == nullptr ? nullptr : t.data + dtype_bytes(t.dtype, begin * row);
  out.nbytes = static_cast<size_t>(dtype_bytes(t.dtype, (end - begin) * row));
  return out;
}

Status check_shape(const io::TensorRef& t, const std::vector<int64_t>& shape,
                   const std::string& source) {
  if (t.shape != shape)
    return invalid_argument("tensor '" + t.name + "' in '" + source + "' has shape " +
                            shape_str(t.shape) + " but the model config needs " + shape_str(shape));
  return ok_status();
}

Result<std::unique_ptr<WeightSource>> open_safetensors_source(const std::string& dir) {
  STRATA_ASSIGN_OR_RETURN(auto set, io::SafetensorsSet::open_dir(dir));
  return std::unique_ptr<WeightSource>(new SafetensorsSource(std::move(set)));
}

std::unique_ptr<WeightSource> make_gguf_source(std::shared_ptr<io::GgufFile> gguf) {
  return std::make_unique<GgufSource>(std::move(gguf));
}

std::unique_ptr<WeightSource> make_dummy_source(uint64_t seed, DType dtype, double stddev) {
  return std::make_unique<DummySource>(seed, dtype, stddev);
}

std::unique_ptr<WeightSource> make_int_quant_dummy_source(std::unique_ptr<WeightSource> floats,
                                                          const IntQuantization& quant,
                                                          uint64_t seed, double stddev) {
  return std::make_unique<IntQuantDummySource>(std::move(floats), quant, seed, stddev);
}

}  // namespace strata
