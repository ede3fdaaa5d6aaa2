#include "quant/ggml_types.h"

namespace latte {

namespace {
constexpr GgmlTypeInfo kTypes[] = {
    {GgmlType::F32, "F32", 1, 4},        {GgmlType::F16, "F16", 1, 2},
    {GgmlType::BF16, "BF16", 1, 2},      {GgmlType::Q4_0, "Q4_0", 32, 18},
    {GgmlType::Q4_1, "Q4_1", 32, 20},    {GgmlType::Q5_0, "Q5_0", 32, 22},
    {GgmlType::Q5_1, "Q5_1", 32, 24},    {GgmlType::Q8_0, "Q8_0", 32, 34},
    {GgmlType::Q2_K, "Q2_K", 256, 84},   {GgmlType::Q3_K, "Q3_K", 256, 110},
    {GgmlType::Q4_K, "Q4_K", 256, 144},  {GgmlType::Q5_K, "Q5_K", 256, 176},
    {GgmlType::Q6_K, "Q6_K", 256, 210},  {GgmlType::IQ4_NL, "IQ4_NL", 32, 18},
    {GgmlType::IQ4_XS, "IQ4_XS", 256, 136},
};
}  // namespace

std::optional<GgmlTypeInfo> ggml_type_info(std::uint32_t id) {
  for (const auto& t : kTypes)
    if (static_cast<std::uint32_t>(t.type) == id) return t;
  return std::nullopt;
}

bool ggml_has_super_blocks(GgmlType t) {
  return t == GgmlType::Q2_K || t == GgmlType::Q3_K || t == GgmlType::Q4_K || t == GgmlType::Q5_K ||
         t == GgmlType::Q6_K || t == GgmlType::IQ4_XS;
}

const char* ggml_type_name(GgmlType t) {
  auto info = ggml_type_info(static_cast<std::uint32_t>(t));
  return info ? info->name : "unknown";
}

}  // namespace latte
