// ISA names, what this binary holds, what this CPU runs, and the LATTE_ISA cap
// (kernels/isa.h). Baseline flags only: it runs before any ISA is chosen. What
// the CPU runs comes from the platform layer (platform/cpu_features.h).
#include "kernels/isa.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "platform/cpu_features.h"

namespace latte {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::ref: return "ref";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    case Isa::neon: return "neon";
    case Isa::asimd: return "asimd";
  }
  return "?";
}

std::optional<Isa> parse_isa(std::string_view name) {
  for (Isa i : {Isa::ref, Isa::avx2, Isa::avx512, Isa::asimd, Isa::neon})
    if (name == isa_name(i)) return i;
  return std::nullopt;
}

namespace {

bool cpu_runs(Isa isa) {
  const CpuFeatures& f = cpu_features();  // the OS's support included
  switch (isa) {
    case Isa::ref: return true;
    case Isa::avx2: return f.avx2 && f.fma && f.f16c;
    case Isa::avx512:
      return cpu_runs(Isa::avx2) && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni;
    case Isa::asimd: return f.asimd;
    case Isa::neon: return f.asimd && f.asimd_dot;  // sdot; nothing uses fp16 arithmetic
  }
  return false;
}

bool compiled_in(Isa isa) {
  switch (isa) {
    case Isa::ref: return true;
#ifdef LATTE_HAVE_AVX2
    case Isa::avx2: return true;
#endif
#ifdef LATTE_HAVE_AVX512
    case Isa::avx512: return true;
#endif
#ifdef LATTE_HAVE_ASIMD
    case Isa::asimd: return true;
#endif
#ifdef LATTE_HAVE_NEON
    case Isa::neon: return true;
#endif
    default: return false;
  }
}

}  // namespace

bool isa_supported(Isa isa) { return compiled_in(isa) && cpu_runs(isa); }

std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa i : {Isa::ref, Isa::avx2, Isa::avx512, Isa::asimd, Isa::neon})  // worst to best
    if (isa_supported(i)) out.push_back(i);
  return out;
}

Isa best_isa_up_to(Isa cap) {
  if (cap == Isa::neon && isa_supported(Isa::neon)) return Isa::neon;
  if (cap == Isa::neon || cap == Isa::asimd) return isa_supported(Isa::asimd) ? Isa::asimd : Isa::ref;
  Isa best = Isa::ref;
  for (Isa i : {Isa::avx2, Isa::avx512})
    if (static_cast<int>(i) <= static_cast<int>(cap) && isa_supported(i)) best = i;
  return best;
}

Isa active_isa() {
  static const Isa chosen = [] {
    const char* env = std::getenv("LATTE_ISA");
    if (env == nullptr || *env == '\0') {
      Isa best = Isa::ref;
      for (Isa i : supported_isas()) best = i;  // ascending order: last is best
      return best;
    }
    auto cap = parse_isa(env);
    if (!cap)
      throw std::runtime_error(std::string("LATTE_ISA='") + env +
                               "' is not one of ref, avx2, avx512, asimd, neon");
    return best_isa_up_to(*cap);
  }();
  return chosen;
}

std::string slower_isa_note() {
  const Isa isa = active_isa();
  Isa cpu_best = Isa::ref;
  for (Isa i : supported_isas()) cpu_best = i;  // ascending order: last is best
  if (isa != cpu_best) {
    const char* cap = std::getenv("LATTE_ISA");
    return std::string("kernels: ") + isa_name(isa) + ", as LATTE_ISA=" + (cap ? cap : "") + " caps them; this CPU runs " +
           isa_name(cpu_best) + "'s, which are faster";
  }
#if defined(LATTE_HAVE_NEON)
  if (isa == Isa::ref || isa == Isa::asimd)
    return std::string("kernels: ") + isa_name(isa) +
           ": this CPU lacks the ARMv8.2 dot products (asimddp) the faster neon kernels need";
#elif defined(LATTE_HAVE_AVX2)
  if (isa == Isa::ref)
    return "kernels: ref (scalar): this CPU lacks the AVX2, FMA and F16C the avx2 kernels need; they run several times "
           "faster";
#endif
  return "";
}

}  // namespace latte
