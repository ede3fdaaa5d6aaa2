// The table of GGML types Latte reads (ids, names, block sizes) behind
// quant/ggml_types.h, and llama.cpp's names for the others.
#include "quant/ggml_types.h"

#include <string>

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

const char* ggml_type_id_name(std::uint32_t id) {
  static const char* const kNames[] = {
      "F32",    "F16",   "Q4_0", "Q4_1",    "Q4_2", "Q4_3",  "Q5_0",   "Q5_1",  "Q8_0",  "Q8_1",
      "Q2_K",   "Q3_K",  "Q4_K", "Q5_K",    "Q6_K", "Q8_K",  "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
      "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8",   "I16",   "I32",    "I64",   "F64",   "IQ1_M",
      "BF16",   nullptr, nullptr, nullptr,  "TQ1_0", "TQ2_0", nullptr, nullptr, nullptr, "MXFP4"};
  return id < sizeof(kNames) / sizeof(kNames[0]) ? kNames[id] : nullptr;
}

const char* ggml_supported_type_names() {
  static const std::string names = [] {
    std::string s;
    for (const auto& t : kTypes) s += (s.empty() ? "" : ", ") + std::string(t.name);
    return s;
  }();
  return names.c_str();
}

const char* ggml_type_name(GgmlType t) {
  auto info = ggml_type_info(static_cast<std::uint32_t>(t));
  return info ? info->name : "unknown";
}

}  // namespace latte
