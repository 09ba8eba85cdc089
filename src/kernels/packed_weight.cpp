#include "kernels/packed_weight.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "kernels/quant_weight.h"

namespace strata {

Result<PackedWeight> PackedWeight::pack(const void* src, DType src_dtype, int64_t n, int64_t k,
                                        DType storage) {
  Part part{src, src_dtype, n};
  return pack_rows(&part, 1, k, storage);
}

Result<PackedWeight> PackedWeight::pack_rows(const Part* parts, int num_parts, int64_t k,
                                             DType storage) {
  if (storage == DType::kF8E4M3) {  // quantised here with DeepSeek's 128 x 128 blocks
    std::vector<Fp8Part> fp8;
    for (int i = 0; i < num_parts; ++i) {
      if (parts[i].dtype == DType::kF8E4M3)
        return invalid_argument("FP8 weights need their block scales (use pack_fp8_rows)");
      fp8.push_back({parts[i].data, parts[i].dtype, parts[i].n, nullptr});
    }
    return pack_fp8_rows(fp8.data(), num_parts, k, 128, 128);
  }
  STRATA_RETURN_IF_ERROR(check_storage(storage, k));
  const bool quant = is_block_quant(storage);
  PackedWeight w;
  w.dtype_ = storage;
  w.k_ = k;
  QuantLayout L;
  if (quant) {
    L = strata::quant_layout(storage, k);
    w.layout_ = L;
    w.quant_ = true;
  }
  for (int i = 0; i < num_parts; ++i) {
    DType d = parts[i].dtype;
    if (!dtype_is_float(d) || d == DType::kF64)
      return unimplemented(std::string("cannot use a ") + dtype_name(d) + " tensor as a weight");
    if (k % dtype_block_elems(d) != 0)
      return invalid_argument(std::string(dtype_name(d)) + " rows must hold a multiple of " +
                              std::to_string(dtype_block_elems(d)) + " values");
    if (quant && d != storage && storage != DType::kQ8_0)
      return unimplemented(std::string("cannot quantize a ") + dtype_name(d) + " tensor to " +
                           dtype_name(storage) + " (only to q8_0)");
    w.n_ += parts[i].n;
  }
  w.data_.resize(static_cast<size_t>(w.num_panels() * w.panel_bytes()));
  std::vector<float> row(k);
  std::vector<std::byte> converted(k * 4);
  std::vector<BlockQ8_0> q8(quant ? k / 32 : 0);
  DecodedBlock blk;
  int64_t r = 0;
  for (int i = 0; i < num_parts; ++i) {
    DType sd = parts[i].dtype;
    int64_t row_bytes = dtype_bytes(sd, k);
    for (int64_t j = 0; j < parts[i].n; ++j, ++r) {
      const std::byte* src_row = static_cast<const std::byte*>(parts[i].data) + j * row_bytes;
      int64_t p = r / kPanelRows, lane = r % kPanelRows;
      std::byte* panel = w.data_.data() + p * w.panel_bytes();
      if (quant) {
        const std::byte* blocks = src_row;
        if (sd != storage) {  // float -> Q8_0
          dequantize_row(sd, src_row, row.data(), k);
          quantize_row(DType::kQ8_0, row.data(), q8.data(), k);
          blocks = reinterpret_cast<const std::byte*>(q8.data());
        }
        const int64_t bb = dtype_block_bytes(storage), nsb = k / L.super, nsub = L.num_sub();
        for (int64_t s = 0; s < nsb; ++s) {
          decode_quant_block(storage, blocks + s * bb, &blk);
          auto* u = reinterpret_cast<uint8_t*>(panel + (s / L.group) * L.unit_bytes());
          const int64_t g = s % L.group;
          std::memcpy(u + (g * 16 + lane) * 2, &blk.d_bits, 2);
          if (L.has_min) std::memcpy(u + L.group * 32 + (g * 16 + lane) * 2, &blk.dmin_bits, 2);
          uint8_t* sb = u + L.header_bytes() + g * (L.scale_bytes() + L.quant_bytes());
          if (L.has_sc) {
            for (int64_t jj = 0; jj < nsub; ++jj) {
              sb[jj * 16 + lane] = static_cast<uint8_t>(blk.sc[jj]);
              if (L.has_min) sb[(nsub + jj) * 16 + lane] = blk.m[jj];
            }
          }
          uint8_t* quants = sb + L.scale_bytes();
          for (int c = 0; c < L.super; ++c)
            quant_put(quants + (c / L.sub) * L.sub_quant_bytes(), L, static_cast<int>(lane),
                      c % L.sub, blk.q[c]);
        }
        continue;
      }
      int64_t es = dtype_block_bytes(storage);
      const std::byte* conv = src_row;
      if (sd != storage) {
        dequantize_row(sd, src_row, row.data(), k);
        quantize_row(storage, row.data(), converted.data(), k);
        conv = converted.data();
      }
      std::byte* dst = panel + lane * es;
      if (es == 2) {
        for (int64_t c = 0; c < k; ++c) std::memcpy(dst + c * kPanelRows * 2, conv + c * 2, 2);
      } else {
        for (int64_t c = 0; c < k; ++c) std::memcpy(dst + c * kPanelRows * 4, conv + c * 4, 4);
      }
    }
  }
  return w;
}

Status PackedWeight::check_storage(DType storage, int64_t k) {
  if (storage == DType::kF8E4M3) return ok_status();
  const bool quant = is_block_quant(storage);
  if (storage != DType::kF32 && storage != DType::kF16 && storage != DType::kBF16 && !quant)
    return unimplemented(std::string("matmul weights cannot be stored as ") + dtype_name(storage));
  if (quant && k % dtype_block_elems(storage) != 0)
    return invalid_argument(
        std::string(dtype_name(storage)) + " weights need rows of a multiple of " +
        std::to_string(dtype_block_elems(storage)) + " values, got " + std::to_string(k));
  if (storage == DType::kW4G || storage == DType::kW8G)
    return invalid_argument("W4G/W8G weights come from integer checkpoints (pack_int_rows)");
  return ok_status();
}

Result<PackedWeight> PackedWeight::pack_int_rows(const IntPart* parts, int num_parts, int64_t k,
                                                 int bits, int64_t group) {
  QuantLayout L;
  if (!grouped_int_layout(bits, group, k, &L))
    return unimplemented(std::to_string(bits) + "-bit weights in groups of " +
                         std::to_string(group) + " columns (rows of " + std::to_string(k) +
                         ") cannot be stored as integers (bits 4 or 8, groups of a multiple of 32 "
                         "that divide the row)");
  PackedWeight w;
  w.dtype_ = bits == 4 ? DType::kW4G : DType::kW8G;
  w.k_ = k;
  w.quant_ = true;
  w.layout_ = L;
  for (int i = 0; i < num_parts; ++i) w.n_ += parts[i].n;
  w.data_.resize(static_cast<size_t>(w.num_panels() * w.panel_bytes()));  // zeroed
  const int64_t nsb = k / L.super, ngroups = k / group, maxq = (1 << bits) - 1;
  int64_t r = 0;
  for (int i = 0; i < num_parts; ++i) {
    const IntPart& part = parts[i];
    for (int64_t j = 0; j < part.n; ++j, ++r) {
      const int lane = static_cast<int>(r % kPanelRows);
      std::byte* panel = w.data_.data() + (r / kPanelRows) * w.panel_bytes();
      const uint8_t* q = part.q + j * k;
      for (int64_t s = 0; s < nsb; ++s) {
        const int64_t g = s * L.super / group;
        const uint16_t scale = part.scales[j * ngroups + g];
        const int zp = part.zeros[j * ngroups + g];
        if (zp > maxq + 1)
          return invalid_argument("zero point " + std::to_string(zp) + " out of range for " +
                                  std::to_string(bits) + "-bit weights");
        // 4-bit: d = s, dmin = s, m = zp. 8-bit (z = 128): dmin = +-s, m = |zp - 128|.
        uint16_t dmin = scale;
        int m = zp;
        if (bits == 8) {
          m = zp >= 128 ? zp - 128 : 128 - zp;
          if (zp < 128) dmin = static_cast<uint16_t>(scale ^ 0x8000u);  // -s: exact
        }
        auto* u = reinterpret_cast<uint8_t*>(panel + s * L.unit_bytes());
        std::memcpy(u + lane * 2, &scale, 2);
        std::memcpy(u + 32 + lane * 2, &dmin, 2);
        uint8_t* sb = u + L.header_bytes();
        sb[lane] = 1;                             // sc
        sb[16 + lane] = static_cast<uint8_t>(m);  // m
        uint8_t* quants = sb + L.scale_bytes();
        for (int c = 0; c < L.super; ++c) {
          const int v = q[s * L.super + c];
          if (v > maxq)
            return invalid_argument("quantized value " + std::to_string(v) + " out of range for " +
                                    std::to_string(bits) + "-bit weights");
          quant_put(quants, L, lane, c, v);
        }
      }
    }
  }
  return w;
}

float PackedWeight::at(int64_t row, int64_t col) const {
  STRATA_DCHECK(row < n_ && col < k_);
  int64_t p = row / kPanelRows, lane = row % kPanelRows;
  const std::byte* pan = panel(p);
  if (dtype_ == DType::kF8E4M3) {
    const std::byte* blk = pan + fp8_block_offset(col / fp8_block_k_);
    float scale;
    std::memcpy(&scale, blk + lane * 4, 4);
    const auto q =
        static_cast<uint8_t>(blk[kFp8ScaleBytes + (col % fp8_block_k_) * kPanelRows + lane]);
    return fp8_e4m3_to_f32(q) * scale;
  }
  if (quant_) {
    const QuantLayout& L = layout_;
    const int64_t s = col / L.super, g = s % L.group, c = col % L.super, j = c / L.sub;
    const auto* u = reinterpret_cast<const uint8_t*>(pan + (s / L.group) * L.unit_bytes());
    uint16_t bits;
    std::memcpy(&bits, u + (g * 16 + lane) * 2, 2);
    const float d = f16_to_f32(bits);
    float dmin = 0;
    if (L.has_min) {
      std::memcpy(&bits, u + L.group * 32 + (g * 16 + lane) * 2, 2);
      dmin = f16_to_f32(bits);
    }
    const uint8_t* sb = u + L.header_bytes() + g * (L.scale_bytes() + L.quant_bytes());
    const int sc = L.has_sc ? static_cast<int8_t>(sb[j * 16 + lane]) : 1;
    const int mn = L.has_sc && L.has_min ? sb[(L.num_sub() + j) * 16 + lane] : 1;
    const uint8_t* quants = sb + L.scale_bytes() + j * L.sub_quant_bytes();
    const int q = quant_get(quants, L, static_cast<int>(lane), static_cast<int>(c % L.sub));
    return d * static_cast<float>(sc * (q - L.zero)) -
           (L.has_min ? dmin * static_cast<float>(mn) : 0.0f);
  }
  float v;
  dequantize_row(dtype_, pan + (col * kPanelRows + lane) * dtype_block_bytes(dtype_), &v, 1);
  return v;
}

PackedWeight PackedWeight::panel_range(int64_t first, int64_t count) const {
  STRATA_CHECK(first >= 0 && count >= 0 && first + count <= num_panels())
      << "panels [" << first << ", " << first + count << ") of a weight of " << num_panels();
  PackedWeight w;
  w.dtype_ = dtype_;
  w.k_ = k_;
  w.fp8_block_k_ = fp8_block_k_;
  w.quant_ = quant_;
  w.layout_ = layout_;
  w.n_ = std::min(n_, (first + count) * kPanelRows) - std::min(n_, first * kPanelRows);
  const size_t bytes = static_cast<size_t>(count * panel_bytes());
  w.data_ = AlignedBuffer::uninitialized(bytes);
  if (bytes > 0) std::memcpy(w.data_.data(), panel(first), bytes);
  return w;
}

Status PackedWeight::place_in_order(std::span<PackedWeight* const> weights,
                                    DeviceAllocator& allocator) {
  constexpr size_t kAlign = AlignedBuffer::kAlignment;
  size_t total = 0;
  for (const PackedWeight* w : weights)
    if (!w->empty()) total += (static_cast<size_t>(w->bytes()) + kAlign - 1) / kAlign * kAlign;
  if (total == 0) return ok_status();
  STRATA_ASSIGN_OR_RETURN(DeviceBuffer buffer, allocator.allocate(total, MemoryUse::kWeights));
  auto arena = std::make_shared<DeviceBuffer>(std::move(buffer));
  size_t offset = 0;
  for (PackedWeight* w : weights) {
    if (w->empty()) continue;
    const size_t n = static_cast<size_t>(w->bytes()), padded = (n + kAlign - 1) / kAlign * kAlign;
    std::byte* dst = arena->data() + offset;
    // In pieces, dropping each copied piece of the old buffer at once (whole pages only; the
    // buffer is freed just after): the peak is the total plus one piece, not plus the largest
    // weight (an output head is often the largest by far).
    constexpr size_t kPiece = size_t{1} << 20;
    const std::byte* src = w->data();
    const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    for (size_t done = 0; done < n; done += kPiece) {
      const size_t len = std::min(kPiece, n - done);
      std::memcpy(dst + done, src + done, len);
      const uintptr_t b = (reinterpret_cast<uintptr_t>(src + done) + page - 1) / page * page;
      const uintptr_t e = reinterpret_cast<uintptr_t>(src + done + len) / page * page;
      if (w->arena_ == nullptr && e > b)
        ::madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
    }
    std::memset(dst + n, 0, padded - n);
    w->data_ = AlignedBuffer();
    w->arena_ = arena;
    w->arena_data_ = dst;
    offset += padded;
  }
  return ok_status();
}

}  // namespace strata
