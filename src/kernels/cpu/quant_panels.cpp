#include "kernels/cpu/quant_panels.h"

#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/cpu/int8_panels.h"

namespace pypto::cpu {
namespace {
size_t align64(size_t n) { return (n + 63) / 64 * 64; }
}  // namespace

QuantPanels quant_panels(WeightFormat format, int64_t n, int64_t k, int32_t group) {
  QuantPanels l;
  l.panels = (n + 15) / 16;
  const size_t cols = static_cast<size_t>(l.panels) * 16;
  switch (format) {
    case WeightFormat::Int8:
      l.groups = 1;
      l.weights_bytes = int8_panels_bytes(n, k);
      l.scale_offset = align64(l.weights_bytes);
      l.aux_offset = l.scale_offset + align64(cols * 4);
      l.total_bytes = l.aux_offset + align64(cols * 4);
      break;
    case WeightFormat::Int4:
      PYPTO_ASSERT(group > 0 && group % 8 == 0 && k % 8 == 0, "int4 group ", group, " k ", k);
      l.groups = (k + group - 1) / group;
      l.weights_bytes = static_cast<size_t>((l.panels + 3) / 4 * l.groups * q4_record_bytes(group));
      l.scale_offset = l.aux_offset = 0;  // inside the records
      l.total_bytes = l.weights_bytes;
      break;
    case WeightFormat::Fp8:
      PYPTO_ASSERT(group > 0, "fp8 group ", group);
      l.groups = (k + group - 1) / group;
      l.weights_bytes = static_cast<size_t>(l.panels * k) * 16;
      l.scale_offset = align64(l.weights_bytes);
      l.aux_offset = l.scale_offset;
      l.total_bytes = l.scale_offset + align64(static_cast<size_t>(l.panels * l.groups) * 16 * 4);
      break;
    case WeightFormat::Float: PYPTO_ASSERT(false, "quant_panels of a float weight");
  }
  return l;
}

void pack_quant_panels(const QuantizedWeight& s, uint8_t* dst, int64_t row0, int64_t n_total) {
  const int64_t n = s.n_out, k = s.k_in;
  PYPTO_ASSERT(row0 % 16 == 0 && row0 + n <= n_total, "rows [", row0, ", ", row0 + n, ") of ", n_total);
  const QuantPanels l = quant_panels(s.format, n_total, k, s.group);
  if (row0 == 0) std::memset(dst, 0, l.total_bytes);
  float* scale = reinterpret_cast<float*>(dst + l.scale_offset);
  switch (s.format) {
    case WeightFormat::Int8: {
      pack_int8_panels(s.q8, n, k, reinterpret_cast<int8_t*>(dst) + (row0 / 16) * int8_panel_bytes(k));
      auto* colsum = reinterpret_cast<int32_t*>(dst + l.aux_offset);
      for (int64_t r = 0; r < n; ++r) {
        int32_t sum = 0;
        for (int64_t c = 0; c < k; ++c) sum += s.q8[r * k + c];
        scale[row0 + r] = s.scale[r];
        colsum[row0 + r] = 128 * sum;
      }
      break;
    }
    case WeightFormat::Int4: {
      const int64_t G = l.groups, g = s.group, chunks = g / 8, rec = q4_record_bytes(s.group);
      for (int64_t r = 0; r < n; ++r) {
        const int64_t R = row0 + r, sp = R / 64, lane = (R % 64) / 16, c = R % 16;
        for (int64_t gi = 0; gi < G; ++gi) {
          uint8_t* record = dst + (sp * G + gi) * rec;
          for (int64_t j = gi * g; j < k && j < (gi + 1) * g; ++j) {
            const int64_t rel = j - gi * g, chunk = rel / 8, within = rel % 8;
            const uint8_t v = s.q4[r * k + j] & 0x0F;
            uint8_t& b = record[chunk * 256 + lane * 64 + 4 * c + within % 4];
            b = static_cast<uint8_t>(within < 4 ? (b & 0xF0) | v : (b & 0x0F) | (v << 4));
          }
          float sc = s.scale[r * G + gi];
          std::memcpy(record + chunks * 256 + lane * 64 + 4 * c, &sc, 4);
          record[chunks * 256 + 256 + lane * 16 + c] = s.zero[r * G + gi];
        }
      }
      break;
    }
    case WeightFormat::Fp8: {
      const int64_t G = l.groups;
      for (int64_t r = 0; r < n; ++r) {
        const int64_t p = (row0 + r) / 16, c = r % 16;
        for (int64_t j = 0; j < k; ++j) dst[(p * k + j) * 16 + c] = s.e4m3[r * k + j];
        for (int64_t gi = 0; gi < G; ++gi) scale[(p * G + gi) * 16 + c] = s.scale[r * G + gi];
      }
      break;
    }
    case WeightFormat::Float: PYPTO_ASSERT(false, "pack_quant_panels of a float weight");
  }
}

void quant_panel_row_to_f32(const LinearWeight& w, int64_t r, float* out) {
  const int64_t k = w.k_in;
  const QuantPanels l = quant_panels(w.format, w.n_out, k, w.group);
  const auto* base = static_cast<const uint8_t*>(w.data);
  const float* scale = reinterpret_cast<const float*>(base + l.scale_offset);
  const int64_t p = r / 16, c = r % 16;
  switch (w.format) {
    case WeightFormat::Int8: {
      const auto* panel = reinterpret_cast<const int8_t*>(base) + p * int8_panel_bytes(k);
      for (int64_t j = 0; j < k; ++j) out[j] = static_cast<float>(panel[(j / 4) * 64 + 4 * c + j % 4]) * scale[r];
      break;
    }
    case WeightFormat::Int4: {
      const int64_t G = l.groups, g = w.group, chunks = g / 8, rec = q4_record_bytes(w.group);
      const int64_t sp = r / 64, lane = (r % 64) / 16;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t gi = j / g, rel = j % g;
        const uint8_t* record = base + (sp * G + gi) * rec;
        const uint8_t b = record[(rel / 8) * 256 + lane * 64 + 4 * c + rel % 4];
        const int q = rel % 8 < 4 ? (b & 0x0F) : (b >> 4);
        float sc;
        std::memcpy(&sc, record + chunks * 256 + lane * 64 + 4 * c, 4);
        out[j] = static_cast<float>(q - record[chunks * 256 + 256 + lane * 16 + c]) * sc;
      }
      break;
    }
    case WeightFormat::Fp8: {
      const int64_t G = l.groups;
      for (int64_t j = 0; j < k; ++j)
        out[j] = e4m3_to_f32(base[(p * k + j) * 16 + c]) * scale[(p * G + j / w.group) * 16 + c];
      break;
    }
    case WeightFormat::Float: PYPTO_ASSERT(false, "quant_panel_row_to_f32 of a float weight");
  }
}

}  // namespace pypto::cpu
