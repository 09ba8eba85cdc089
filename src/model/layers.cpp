#include "model/layers.h"

#include <algorithm>
#include <cstring>

#include "core/logging.h"
#include "kernels/fp8.h"
#include "model/model.h"

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
      return dtype_is_gguf_quant(tensor_dtype) ? tensor_dtype : DType::kBF16;
  }
}

PackedStorage packed_storage(const std::vector<DType>& part_dtypes, int64_t k,
                             std::optional<DType> storage, const Fp8Quantization& fp8) {
  bool any_fp8 = false, all_fp8 = true;
  for (DType d : part_dtypes) {
    any_fp8 = any_fp8 || d == DType::kF8E4M3;
    all_fp8 = all_fp8 && d == DType::kF8E4M3;
  }
  if (any_fp8 || storage == DType::kF8E4M3) {
    // FP8 parts stay FP8 with their blocks (float parts are quantised into the same blocks)
    // when all are FP8 or FP8 was asked for; else all are dequantised into the float storage.
    if (all_fp8 || storage == DType::kF8E4M3) return {DType::kF8E4M3, fp8.block_k};
    DType st = matmul_storage(storage, DType::kBF16);
    if (st == DType::kQ8_0 && k % 32 != 0) st = DType::kBF16;
    return {st};
  }
  // Fused parts share one storage type: the requested one, else the first part's. Parts of
  // different block-quantized types (a Q4_K_M file's Q4_K attn_q with its Q6_K attn_v) cannot
  // share one, and there is no quantizer into the GGUF types here: they are requantized to Q8_0,
  // which loses less than any of them.
  DType st = matmul_storage(storage, part_dtypes.empty() ? DType::kBF16 : part_dtypes[0]);
  if (!storage && dtype_is_gguf_quant(st)) {
    for (DType d : part_dtypes)
      if (d != st) st = k % 32 == 0 ? DType::kQ8_0 : DType::kBF16;
  }
  if (st == DType::kQ8_0 && k % 32 != 0) st = DType::kBF16;
  return {st};
}

Result<WeightPlan> plan_pack(int64_t n, int64_t k, DType storage) {
  STRATA_RETURN_IF_ERROR(PackedWeight::check_storage(storage, k));
  // PackedWeight::pack_rows quantises F8E4M3 with 128 x 128 blocks.
  return WeightPlan{storage, n, k, PackedWeight::bytes_for(storage, n, k, 128)};
}

namespace {

// The block scales of an FP8 checkpoint tensor ([ceil(rows / block_n), ceil(k / block_k)]).
Result<std::vector<float>> load_fp8_scales(WeightSource& src, const std::string& name, int64_t rows,
                                           int64_t k, const Fp8Quantization& fp8) {
  if (fp8.per_tensor) {
    // `<name>_scale`: one scale for the tensor ([] or [1]) or one per output row ([rows, 1] or
    // [rows]); as block scales of one row by the whole row.
    const std::string scale_name = name + "_scale";
    if (!src.has(scale_name))
      return invalid_argument("FP8 tensor '" + name + "' in '" + src.describe() + "' has no '" +
                              scale_name + "' (its per-tensor or per-channel scale)");
    for (const std::vector<int64_t>& shape :
         {std::vector<int64_t>{}, std::vector<int64_t>{1}, std::vector<int64_t>{rows, 1},
          std::vector<int64_t>{rows}}) {
      auto s = src.get(scale_name, shape);
      if (!s.ok()) continue;
      if (!dtype_is_float(s->dtype) || s->dtype == DType::kF8E4M3 ||
          dtype_block_elems(s->dtype) != 1)
        return unimplemented("scale '" + scale_name + "' has dtype " + dtype_name(s->dtype));
      const int64_t count = s->numel();
      std::vector<float> got(count);
      dequantize_row(s->dtype, s->data, got.data(), count);
      std::vector<float> v(rows);
      for (int64_t r = 0; r < rows; ++r) v[r] = count == 1 ? got[0] : got[r];
      return v;
    }
    return invalid_argument("FP8 scale '" + scale_name + "' in '" + src.describe() +
                            "' must hold one value or one per output row (" + std::to_string(rows) +
                            ")");
  }
  const std::string scale_name = name + "_scale_inv";
  const int64_t sn = fp8_block_count(rows, fp8.block_n), sk = fp8_block_count(k, fp8.block_k);
  if (!src.has(scale_name))
    return invalid_argument("FP8 tensor '" + name + "' in '" + src.describe() + "' has no '" +
                            scale_name + "' (block scales)");
  STRATA_ASSIGN_OR_RETURN(io::TensorRef s, src.get(scale_name, {sn, sk}));
  if (!dtype_is_float(s.dtype) || s.dtype == DType::kF8E4M3 || s.dtype == DType::kQ8_0 ||
      s.dtype == DType::kF64)
    return unimplemented("block scales '" + scale_name + "' have dtype " + dtype_name(s.dtype));
  std::vector<float> v(sn * sk);
  dequantize_row(s.dtype, s.data, v.data(), sn * sk);
  return v;
}

// Whether every row slice among `parts` starts on a block of `block_n` rows and ends on one or at
// its tensor's end: then its blocks are the whole tensor's.
bool slices_on_blocks(const std::vector<RowPart>& parts, int64_t block_n) {
  for (const RowPart& p : parts) {
    const int64_t b = p.begin, e = p.begin + p.local_rows();
    if (p.sliced() && (b % block_n != 0 || (e % block_n != 0 && e != p.rows))) return false;
  }
  return true;
}

bool slices_any(const std::vector<RowPart>& parts) {
  for (const RowPart& p : parts)
    if (p.sliced()) return true;
  return false;
}

// The error for a row slice of a weight quantized into FP8 blocks at load whose blocks would not
// be the whole tensor's (a tensor-parallel shard must fall on them to stay exact).
Status fp8_slice_error(const WeightSource& src, const std::vector<RowPart>& parts, int64_t layer,
                       int64_t block_n) {
  std::string msg = "'";
  msg += tensor_name(parts[0].name, src.naming(), layer);
  msg += "' in ";
  msg += src.describe();
  msg += " is quantized into FP8 blocks of ";
  msg += std::to_string(block_n);
  msg += " rows, which this tensor-parallel shard does not start and end on";
  return unimplemented(msg);
}

Result<PackedWeight> load_fp8_packed(WeightSource& src, const std::vector<RowPart>& parts,
                                     const std::vector<io::TensorRef>& tensors, int64_t k,
                                     int64_t layer, std::optional<DType> storage,
                                     const Fp8Quantization& fp8) {
  std::vector<std::vector<float>> scales(parts.size());
  std::vector<PackedWeight::Fp8Part> fp8_parts;
  bool all_fp8 = true;
  for (const io::TensorRef& t : tensors) all_fp8 = all_fp8 && t.dtype == DType::kF8E4M3;
  // Row slices (tensor parallelism) keep their tensor's blocks when they fall on them; else the
  // FP8 parts' scales are expanded to one row per row (block_n 1), which holds the same values
  // exactly. Float parts quantized here need whole blocks.
  int64_t block_n = fp8.block_n;
  if (slices_any(parts) && !slices_on_blocks(parts, fp8.block_n)) {
    if (!all_fp8 && storage == DType::kF8E4M3)
      return fp8_slice_error(src, parts, layer, fp8.block_n);
    block_n = 1;
  }
  const int64_t sk = fp8_block_count(k, fp8.block_k);
  for (size_t i = 0; i < parts.size(); ++i) {
    const io::TensorRef& t = tensors[i];
    const int64_t b = parts[i].begin, n = parts[i].local_rows();
    if (t.dtype == DType::kF8E4M3) {
      STRATA_ASSIGN_OR_RETURN(std::vector<float> full,
                              load_fp8_scales(src, t.name, parts[i].rows, k, fp8));
      if (block_n == fp8.block_n && b == 0) {
        scales[i] = std::move(full);
      } else if (block_n == fp8.block_n) {
        const int64_t first = b / block_n;
        scales[i].assign(full.begin() + first * sk,
                         full.begin() + (first + fp8_block_count(n, block_n)) * sk);
      } else {
        scales[i].resize(n * sk);
        for (int64_t r = 0; r < n; ++r)
          std::copy_n(full.begin() + ((b + r) / fp8.block_n) * sk, sk, scales[i].begin() + r * sk);
      }
    }
    fp8_parts.push_back({t.data, t.dtype, n, scales[i].empty() ? nullptr : scales[i].data()});
  }
  std::string what = "'";
  what += tensor_name(parts[0].name, src.naming(), layer);
  what += "' from ";
  what += src.describe();
  std::vector<DType> dtypes;
  for (const io::TensorRef& t : tensors) dtypes.push_back(t.dtype);
  const PackedStorage ps = packed_storage(dtypes, k, storage, fp8);
  if (ps.dtype == DType::kF8E4M3) {
    auto w = PackedWeight::pack_fp8_rows(fp8_parts.data(), static_cast<int>(fp8_parts.size()), k,
                                         block_n, ps.fp8_block_k);
    if (!w.ok()) return w.status().with_context("packing " + what);
    return w;
  }
  // FP8 fused with non-FP8 parts: dequantise the FP8 ones and pack all as the float storage.
  std::vector<std::vector<float>> dense(parts.size());
  std::vector<PackedWeight::Part> float_parts;
  for (size_t i = 0; i < parts.size(); ++i) {
    const int64_t n = parts[i].local_rows();
    if (tensors[i].dtype == DType::kF8E4M3) {
      dense[i].resize(n * k);
      dequantize_fp8_blocks(reinterpret_cast<const uint8_t*>(tensors[i].data), scales[i].data(), n,
                            k, block_n, fp8.block_k, dense[i].data());
      float_parts.push_back({dense[i].data(), DType::kF32, n});
    } else {
      float_parts.push_back({tensors[i].data, tensors[i].dtype, n});
    }
  }
  auto w = PackedWeight::pack_rows(float_parts.data(), static_cast<int>(float_parts.size()), k,
                                   ps.dtype);
  if (!w.ok()) return w.status().with_context("packing " + what);
  return w;
}

// AWQ/GPTQ/compressed-tensors layers (int_quant.h): `bases` names each part's quantized tensors
// ("" for a float part). All parts integer with contiguous groups that the panel layout can hold
// and f16-exact scales: W4G/W8G with the checkpoint's exact values. Otherwise every part is
// dequantized exactly into F32 storage.
// Keeps rows [b, e) of an unpacked integer layer (a tensor-parallel shard: rows are independent,
// their groups run along the columns).
void keep_int_rows(UnpackedIntWeight* u, int64_t b, int64_t e) {
  auto keep = [&](auto& v, int64_t per_row) {
    if (v.empty()) return;
    v.erase(v.begin() + e * per_row, v.end());
    v.erase(v.begin(), v.begin() + b * per_row);
  };
  keep(u->q, u->k);
  keep(u->zeros, u->ngroups);
  keep(u->scales, u->ngroups);
  keep(u->scales_f32, u->ngroups);
  u->n = e - b;
}

Result<PackedWeight> load_int_packed(WeightSource& src, const std::vector<RowPart>& parts,
                                     const std::vector<std::string>& bases, int64_t k,
                                     int64_t layer, const IntQuantization& quant) {
  // A shard unpacks the whole layer and keeps its rows (the packed formats interleave output
  // columns in their words; the unpacked copy is dropped once packed).
  const std::string first = tensor_name(parts[0].name, src.naming(), layer);
  const int64_t group = quant.group_size < 0 ? k : quant.group_size;
  std::vector<UnpackedIntWeight> ints(parts.size());
  bool packable = true, f16_scales = true;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (bases[i].empty()) {
      packable = false;
      continue;
    }
    auto u = read_int_weight(src, bases[i], parts[i].rows, k, quant);
    if (!u.ok()) return u.status().with_context("loading " + quant.method + " layer");
    ints[i] = std::move(u).value();
    if (parts[i].sliced())
      keep_int_rows(&ints[i], parts[i].begin, parts[i].begin + parts[i].local_rows());
    f16_scales = f16_scales && ints[i].scales_f32.empty();
    packable = packable && ints[i].g_idx.empty() && ints[i].scales_f32.empty();
  }
  QuantLayout layout;
  const bool fits = grouped_int_layout(quant.bits, group, k, &layout);
  if (packable && fits) {
    std::vector<PackedWeight::IntPart> ip;
    for (const auto& u : ints) ip.push_back({u.q.data(), u.zeros.data(), u.scales.data(), u.n});
    auto w =
        PackedWeight::pack_int_rows(ip.data(), static_cast<int>(ip.size()), k, quant.bits, group);
    if (!w.ok()) return w.status().with_context("packing '" + first + "' from " + src.describe());
    return w;
  }
  STRATA_LOG(INFO) << "'" << first << "' (" << quant.method << " " << quant.bits << "-bit): "
                   << (!fits ? "groups of " + std::to_string(group) +
                                   " columns do not fit the integer kernels"
                       : !f16_scales ? std::string("scales that f16 cannot hold exactly")
                       : !packable && std::all_of(bases.begin(), bases.end(),
                                                  [](const std::string& b) { return !b.empty(); })
                           ? std::string("act-order (desc_act) groups are not contiguous")
                           : std::string("fused with unquantized parts"))
                   << "; dequantized exactly to f32 storage";
  std::vector<std::vector<float>> dense(parts.size());
  std::vector<PackedWeight::Part> fp;
  for (size_t i = 0; i < parts.size(); ++i) {
    const int64_t n = parts[i].local_rows();
    dense[i].resize(n * k);
    if (bases[i].empty()) {
      STRATA_ASSIGN_OR_RETURN(io::TensorRef t,
                              src.get_rows(tensor_name(parts[i].name, src.naming(), layer),
                                           {parts[i].rows, k}, parts[i].begin, parts[i].begin + n));
      if (!dtype_is_float(t.dtype) || t.dtype == DType::kF64 || t.dtype == DType::kF8E4M3)
        return unimplemented("tensor '" + t.name + "' has dtype " + dtype_name(t.dtype));
      for (int64_t r = 0; r < n; ++r)
        dequantize_row(t.dtype, t.data + dtype_bytes(t.dtype, k) * r, dense[i].data() + r * k, k);
      src.release(t);
    } else {
      for (int64_t r = 0; r < n; ++r)
        for (int64_t c = 0; c < k; ++c) dense[i][r * k + c] = ints[i].value(r, c);
    }
    fp.push_back({dense[i].data(), DType::kF32, n});
  }
  auto w = PackedWeight::pack_rows(fp.data(), static_cast<int>(fp.size()), k, DType::kF32);
  if (!w.ok()) return w.status().with_context("packing '" + first + "' from " + src.describe());
  return w;
}

// The AWQ/GPTQ base name of each part (empty: not integer-quantized); true when any part is.
bool int_quantized_bases(WeightSource& src, const std::vector<RowPart>& parts, int64_t layer,
                         std::vector<std::string>* bases) {
  bool any = false;
  for (const RowPart& p : parts) {
    bases->push_back(int_quantized_base(src, tensor_name(p.name, src.naming(), layer)));
    any = any || !bases->back().empty();
  }
  return any;
}

}  // namespace

Result<PackedWeight> load_packed(WeightSource& src, const std::vector<RowPart>& parts, int64_t k,
                                 int64_t layer, std::optional<DType> storage,
                                 const Fp8Quantization& fp8) {
  if (const IntQuantization* iq = src.int_quant()) {
    std::vector<std::string> bases;
    if (int_quantized_bases(src, parts, layer, &bases))
      return load_int_packed(src, parts, bases, k, layer, *iq);
  }
  std::vector<PackedWeight::Part> packed_parts;
  std::vector<io::TensorRef> tensors;
  bool any_fp8 = false;
  for (const RowPart& p : parts) {
    std::string name = tensor_name(p.name, src.naming(), layer);
    io::TensorRef t;
    if (p.sliced()) {
      STRATA_ASSIGN_OR_RETURN(t,
                              src.get_rows(name, {p.rows, k}, p.begin, p.begin + p.local_rows()));
    } else {
      STRATA_ASSIGN_OR_RETURN(t, src.get(name, {p.rows, k}));
    }
    packed_parts.push_back({t.data, t.dtype, p.local_rows()});
    any_fp8 = any_fp8 || t.dtype == DType::kF8E4M3;
    tensors.push_back(std::move(t));
  }
  if (any_fp8 || storage == DType::kF8E4M3)
    return load_fp8_packed(src, parts, tensors, k, layer, storage, fp8);
  std::vector<DType> dtypes;
  for (const io::TensorRef& t : tensors) dtypes.push_back(t.dtype);
  const DType st = packed_storage(dtypes, k, storage, fp8).dtype;
  auto w =
      PackedWeight::pack_rows(packed_parts.data(), static_cast<int>(packed_parts.size()), k, st);
  if (!w.ok())
    return w.status().with_context("packing '" + tensor_name(parts[0].name, src.naming(), layer) +
                                   "' from " + src.describe());
  for (const auto& t : tensors) src.release(t);
  return w;
}

Result<WeightPlan> plan_packed(WeightSource& src, const std::vector<RowPart>& parts, int64_t k,
                               int64_t layer, std::optional<DType> storage,
                               const Fp8Quantization& fp8) {
  int64_t n = 0;
  for (const RowPart& p : parts) n += p.local_rows();
  if (const IntQuantization* iq = src.int_quant()) {
    // load_int_packed()'s choice: the integer layout when every part is integer with plain
    // groups the panel layout holds, else the exact F32 fallback.
    std::vector<std::string> bases;
    if (int_quantized_bases(src, parts, layer, &bases)) {
      const int64_t group = iq->group_size < 0 ? k : iq->group_size;
      QuantLayout layout;
      bool packable = grouped_int_layout(iq->bits, group, k, &layout);
      for (size_t i = 0; i < parts.size(); ++i) {
        if (bases[i].empty()) {
          STRATA_RETURN_IF_ERROR(
              src.peek(tensor_name(parts[i].name, src.naming(), layer), {parts[i].rows, k})
                  .status());
          packable = false;
          continue;
        }
        auto plain = int_weight_has_plain_groups(src, bases[i], parts[i].rows, k, *iq);
        if (!plain.ok()) return plain.status().with_context("loading " + iq->method + " layer");
        packable = packable && *plain;
      }
      if (!packable) return plan_pack(n, k, DType::kF32);
      const DType d = iq->bits == 4 ? DType::kW4G : DType::kW8G;
      return WeightPlan{d, n, k, PackedWeight::bytes_for(d, n, k, 0, layout)};
    }
  }
  std::vector<DType> dtypes;
  for (const RowPart& p : parts) {
    STRATA_ASSIGN_OR_RETURN(io::TensorRef t,
                            src.peek(tensor_name(p.name, src.naming(), layer), {p.rows, k}));
    dtypes.push_back(t.dtype);
  }
  const PackedStorage ps = packed_storage(dtypes, k, storage, fp8);
  if (storage == DType::kF8E4M3 && slices_any(parts) && !slices_on_blocks(parts, fp8.block_n) &&
      std::any_of(dtypes.begin(), dtypes.end(), [](DType d) { return d != DType::kF8E4M3; }))
    return fp8_slice_error(src, parts, layer, fp8.block_n);
  return WeightPlan{ps.dtype, n, k, PackedWeight::bytes_for(ps.dtype, n, k, ps.fp8_block_k)};
}

Result<std::vector<float>> load_matrix_f32(WeightSource& src, const TensorName& name, int64_t n,
                                           int64_t k, int64_t layer, const Fp8Quantization& fp8) {
  const std::string full = tensor_name(name, src.naming(), layer);
  std::vector<float> out(n * k);
  if (const IntQuantization* iq = src.int_quant()) {
    // An AWQ/GPTQ/compressed-tensors layer: its exact values (as vLLM dequantizes MLA's kv_b_proj
    // of such checkpoints for the absorbed form).
    if (const std::string base = int_quantized_base(src, full); !base.empty()) {
      auto u = read_int_weight(src, base, n, k, *iq);
      if (!u.ok()) return u.status().with_context("loading " + iq->method + " layer");
      for (int64_t r = 0; r < n; ++r)
        for (int64_t c = 0; c < k; ++c) out[r * k + c] = u->value(r, c);
      return out;
    }
  }
  STRATA_ASSIGN_OR_RETURN(io::TensorRef t, src.get(full, {n, k}));
  if (t.dtype == DType::kF8E4M3) {
    STRATA_ASSIGN_OR_RETURN(auto scales, load_fp8_scales(src, full, n, k, fp8));
    dequantize_fp8_blocks(reinterpret_cast<const uint8_t*>(t.data), scales.data(), n, k,
                          fp8.block_n, fp8.block_k, out.data());
    return out;
  }
  if (!dtype_is_float(t.dtype) || t.dtype == DType::kF64 || k % dtype_block_elems(t.dtype) != 0)
    return unimplemented("tensor '" + full + "' in '" + src.describe() + "' has dtype " +
                         dtype_name(t.dtype) + ", which cannot be used as a matrix");
  const int64_t row_bytes = dtype_bytes(t.dtype, k);
  for (int64_t r = 0; r < n; ++r)
    dequantize_row(t.dtype, t.data + r * row_bytes, out.data() + r * k, k);
  src.release(t);
  return out;
}

Status plan_matrix_f32(WeightSource& src, const TensorName& name, int64_t n, int64_t k,
                       int64_t layer) {
  const std::string full = tensor_name(name, src.naming(), layer);
  if (const IntQuantization* iq = src.int_quant()) {
    if (const std::string base = int_quantized_base(src, full); !base.empty()) {
      auto plain = int_weight_has_plain_groups(src, base, n, k, *iq);
      if (!plain.ok()) return plain.status().with_context("loading " + iq->method + " layer");
      return ok_status();
    }
  }
  return src.peek(full, {n, k}).status();
}

namespace {

Status check_vector_dtype(const io::TensorRef& t, int64_t n, const WeightSource& src) {
  if (!dtype_is_float(t.dtype) || t.dtype == DType::kF64 || n % dtype_block_elems(t.dtype) != 0)
    return unimplemented("tensor '" + t.name + "' in '" + src.describe() + "' has dtype " +
                         dtype_name(t.dtype) + ", which cannot be used as a vector");
  return ok_status();
}

}  // namespace

Result<int64_t> plan_vector(WeightSource& src, const TensorName& name, int64_t n, int64_t layer) {
  STRATA_ASSIGN_OR_RETURN(io::TensorRef t, src.peek(tensor_name(name, src.naming(), layer), {n}));
  STRATA_RETURN_IF_ERROR(check_vector_dtype(t, n, src));
  return n * static_cast<int64_t>(sizeof(float));
}

Result<std::vector<float>> load_vector(WeightSource& src, const TensorName& name, int64_t n,
                                       int64_t layer, DummyInit init) {
  std::string full = tensor_name(name, src.naming(), layer);
  STRATA_ASSIGN_OR_RETURN(io::TensorRef t, src.get(full, {n}, init));
  STRATA_RETURN_IF_ERROR(check_vector_dtype(t, n, src));
  std::vector<float> v(n);
  dequantize_row(t.dtype, t.data, v.data(), n);
  src.release(t);
  return v;
}

Result<std::vector<float>> load_vector_range(WeightSource& src, const TensorName& name, int64_t n,
                                             int64_t layer, DummyInit init, int64_t begin,
                                             int64_t end) {
  if (begin == 0 && end == n) return load_vector(src, name, n, layer, init);
  std::string full = tensor_name(name, src.naming(), layer);
  STRATA_ASSIGN_OR_RETURN(io::TensorRef t, src.get_rows(full, {n}, begin, end, init));
  STRATA_RETURN_IF_ERROR(check_vector_dtype(t, end - begin, src));
  std::vector<float> v(end - begin);
  dequantize_row(t.dtype, t.data, v.data(), end - begin);
  src.release(t);
  return v;
}

Result<EmbeddingTable> EmbeddingTable::load(WeightSource& src, const TensorName& name,
                                            int64_t vocab, int64_t hidden,
                                            std::optional<DType> storage, bool keep_in_place,
                                            int64_t row_begin, int64_t row_end) {
  std::string full = tensor_name(name, src.naming(), -1);
  if (row_end < 0) row_end = vocab;
  io::TensorRef t;
  if (row_begin == 0 && row_end == vocab) {
    STRATA_ASSIGN_OR_RETURN(t, src.get(full, {vocab, hidden}));
  } else {
    STRATA_ASSIGN_OR_RETURN(t, src.get_rows(full, {vocab, hidden}, row_begin, row_end));
  }
  STRATA_ASSIGN_OR_RETURN(const DType want, storage_for(t, hidden, storage));
  EmbeddingTable e;
  e.begin_ = row_begin;
  e.rows_ = row_end - row_begin;
  e.cols_ = hidden;
  vocab = e.rows_;
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
  src.release(t);
  return e;
}

Result<DType> EmbeddingTable::storage_for(const io::TensorRef& t, int64_t hidden,
                                          std::optional<DType> storage) {
  if (!dtype_is_float(t.dtype) || t.dtype == DType::kF64 ||
      hidden % dtype_block_elems(t.dtype) != 0)
    return unimplemented("embedding '" + t.name + "' has unsupported dtype " + dtype_name(t.dtype));
  DType want = storage.value_or(t.dtype);
  if (want == DType::kQ8_0 && hidden % 32 != 0) want = DType::kBF16;
  return want;
}

void EmbeddingTable::lookup(const int32_t* ids, int64_t n, float* out, int64_t ld,
                            ThreadPool& pool) const {
  pool.parallel_for(n, 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t row = int64_t{ids[i]} - begin_;
      if (row < 0 || row >= rows_)
        std::memset(out + i * ld, 0, cols_ * sizeof(float));
      else
        dequantize_row(dtype_, data_ + dtype_bytes(dtype_, row * cols_), out + i * ld, cols_);
    }
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

namespace strata {

const char* sharding_name(Sharding s) {
  switch (s) {
    case Sharding::kReplicated:
      return "replicated";
    case Sharding::kColumn:
      return "column";
    case Sharding::kRow:
      return "row";
    case Sharding::kVocab:
      return "vocab";
    case Sharding::kExpert:
      return "expert";
  }
  return "?";
}

}  // namespace strata
