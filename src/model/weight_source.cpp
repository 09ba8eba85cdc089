#include "model/weight_source.h"

#include <cmath>
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
    io::TensorRef t;
    t.name = name;
    t.shape = shape;
    t.dtype = dtype_;
    t.file = "dummy";
    int64_t n = t.numel();
    auto& buf = buffers_[name];
    buf.resize(static_cast<size_t>(dtype_bytes(dtype_, n)));
    std::vector<float> tmp(static_cast<size_t>(std::min<int64_t>(n, 1 << 16)));
    uint64_t h = seed_ ^ 0x9e3779b97f4a7c15ull;
    for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    Rng rng(h);
    // Uniform in [-a, a] has standard deviation a / sqrt(3).
    const float a = static_cast<float>(stddev_ * std::sqrt(3.0));
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
  uint64_t seed_;
  DType dtype_;
  double stddev_;
  std::map<std::string, AlignedBuffer> buffers_;
};

}  // namespace

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

}  // namespace strata
