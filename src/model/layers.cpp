#include "model/layers.h"

#include <cstring>

namespace strata {

std::string tensor_name(const TensorName& name, TensorNaming naming, int64_t layer) {
  std::string s = naming == TensorNaming::kGguf ? name.gguf : name.hf;
  auto pos = s.find("{L}");
  if (pos != std::string::npos) s.replace(pos, 3, std::to_string(layer));
  return s;
}

DType matmul_storage(std::optional<DType> requested, DType tensor_dtype) {
  if (requested) return *requested;
  switch (tensor_dtype) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
      return tensor_dtype;
    default:
      return DType::kBF16;
  }
}

Result<PackedWeight> load_packed(WeightSource& src, const std::vector<RowPart>& parts, int64_t k,
                                 int64_t layer, std::optional<DType> storage) {
  std::vector<PackedWeight::Part> packed_parts;
  std::optional<DType> first_dtype;
  for (const RowPart& p : parts) {
    std::string name = tensor_name(p.name, src.naming(), layer);
    STRATA_ASSIGN_OR_RETURN(io::TensorRef t, src.get(name, {p.rows, k}));
    packed_parts.push_back({t.data, t.dtype, p.rows});
    if (!first_dtype) first_dtype = t.dtype;
  }
  // Fused parts share one storage type: the requested one, else the first part's.
  DType st = matmul_storage(storage, *first_dtype);
  if (st == DType::kQ8_0 && k % 32 != 0) st = DType::kBF16;
  auto w =
      PackedWeight::pack_rows(packed_parts.data(), static_cast<int>(packed_parts.size()), k, st);
  if (!w.ok())
    return w.status().with_context("packing '" + tensor_name(parts[0].name, src.naming(), layer) +
                                   "' from " + src.describe());
  return w;
}

Result<std::vector<float>> load_vector(WeightSource& src, const TensorName& name, int64_t n,
                                       int64_t layer, DummyInit init) {
  std::string full = tensor_name(name, src.naming(), layer);
  STRATA_ASSIGN_OR_RETURN(io::TensorRef t, src.get(full, {n}, init));
  if (!dtype_is_float(t.dtype) || t.dtype == DType::kF64 ||
      (t.dtype == DType::kQ8_0 && n % 32 != 0))
    return unimplemented("tensor '" + full + "' in '" + src.describe() + "' has dtype " +
                         dtype_name(t.dtype) + ", which cannot be used as a vector");
  std::vector<float> v(n);
  dequantize_row(t.dtype, t.data, v.data(), n);
  return v;
}

Result<EmbeddingTable> EmbeddingTable::load(WeightSource& src, const TensorName& name,
                                            int64_t vocab, int64_t hidden,
                                            std::optional<DType> storage, bool keep_in_place) {
  std::string full = tensor_name(name, src.naming(), -1);
  STRATA_ASSIGN_OR_RETURN(io::TensorRef t, src.get(full, {vocab, hidden}));
  if (!dtype_is_float(t.dtype) || t.dtype == DType::kF64 ||
      (t.dtype == DType::kQ8_0 && hidden % 32 != 0))
    return unimplemented("embedding '" + full + "' has unsupported dtype " + dtype_name(t.dtype));
  EmbeddingTable e;
  e.rows_ = vocab;
  e.cols_ = hidden;
  DType want = storage.value_or(t.dtype);
  if (want == DType::kQ8_0 && hidden % 32 != 0) want = DType::kBF16;
  if (want == t.dtype && keep_in_place) {
    e.dtype_ = t.dtype;
    e.data_ = t.data;
    return e;
  }
  e.dtype_ = want;
  e.owned_.resize(static_cast<size_t>(dtype_bytes(want, vocab * hidden)));
  std::vector<float> row(hidden);
  for (int64_t r = 0; r < vocab; ++r) {
    dequantize_row(t.dtype, t.data + dtype_bytes(t.dtype, r * hidden), row.data(), hidden);
    quantize_row(want, row.data(), e.owned_.data() + dtype_bytes(want, r * hidden), hidden);
  }
  e.data_ = e.owned_.data();
  return e;
}

void EmbeddingTable::lookup(const int32_t* ids, int64_t n, float* out, int64_t ld,
                            ThreadPool& pool) const {
  pool.parallel_for(n, 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      dequantize_row(dtype_, data_ + dtype_bytes(dtype_, int64_t{ids[i]} * cols_), out + i * ld,
                     cols_);
  });
}

Result<PackedWeight> EmbeddingTable::as_packed(DType storage) const {
  return PackedWeight::pack(data_, dtype_, rows_, cols_, storage);
}

void add_rows(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t m, int64_t n,
              ThreadPool& pool) {
  pool.parallel_for(m, 8, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float* yr = y + i * ldy;
      const float* xr = x + i * ldx;
      for (int64_t j = 0; j < n; ++j) yr[j] += xr[j];
    }
  });
}

void add_bias(float* y, int64_t ldy, const float* bias, int64_t m, int64_t n) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) y[i * ldy + j] += bias[j];
}

}  // namespace strata
