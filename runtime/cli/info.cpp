#include <cstdint>
#include <cstdio>

#include "runtime/cli/commands.h"
#include "runtime/model_catalog.h"

namespace latte::cli {

namespace {
double gib(std::int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }
}  // namespace

void print_model_cache_table(std::FILE* out) {
  std::fprintf(out,
               "Cache per token per layer (elements): Latte keeps the latent [c_KV ; k_pe]; an MHA\n"
               "runtime keeps per-head K and V. Bytes are over all layers (GiB).\n\n");
  std::fprintf(out, "%-18s %6s %6s %7s %7s | %10s %10s | %10s %10s\n", "model", "layers", "latent",
               "MHA", "ratio", "f16 32K", "MHA16 32K", "f16 128K", "MHA16 128K");
  for (const auto& m : known_mla_models()) {
    auto bytes = [&](std::int64_t elems, std::int64_t tokens) {
      return elems * 2 * m.n_layers * tokens;  // f16
    };
    std::fprintf(out, "%-18s %6d %6lld %7lld %7.2f | %10.2f %10.2f | %10.2f %10.2f\n", m.name,
                 m.n_layers, static_cast<long long>(m.latent_elems()),
                 static_cast<long long>(m.mha_elems()),
                 static_cast<double>(m.mha_elems()) / m.latent_elems(),
                 gib(bytes(m.latent_elems(), 32768)), gib(bytes(m.mha_elems(), 32768)),
                 gib(bytes(m.latent_elems(), 131072)), gib(bytes(m.mha_elems(), 131072)));
  }
}

}  // namespace latte::cli
