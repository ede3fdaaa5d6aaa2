// The GGML tensor types Latte reads from GGUF files: ids, block sizes, names.
// (mla-spec.md section 3.) The block layouts and their dequantize references
// live in quant/ggml_blocks.h.
#pragma once

#include <cstdint>
#include <optional>

namespace latte {

enum class GgmlType : std::uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  IQ4_NL = 20,
  IQ4_XS = 23,
  BF16 = 30,
};

struct GgmlTypeInfo {
  GgmlType type;
  const char* name;
  std::uint32_t block_elems;  // elements per block
  std::uint32_t block_bytes;  // bytes per block
};

// nullopt for a type id Latte does not read (the caller names the tensor).
std::optional<GgmlTypeInfo> ggml_type_info(std::uint32_t id);
const char* ggml_type_name(GgmlType t);
// For messages: llama.cpp's name of any ggml type id it defines (Latte
// reading it or not: "IQ2_XXS" for 16), or nullptr for an id it does not.
const char* ggml_type_id_name(std::uint32_t id);
// The names of the types Latte reads, comma separated.
const char* ggml_supported_type_names();
// Q2_K .. Q6_K and IQ4_XS: 256-element super-blocks, whose products
// quantize the activations per 256 (ActQ8K). (Out of line: per-ISA kernel
// objects must not emit inline copies.)
bool ggml_has_super_blocks(GgmlType t);

}  // namespace latte
