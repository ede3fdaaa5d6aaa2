// Instruction-set selection: which SIMD kernel bodies this binary holds, which
// of them this CPU can run, and which one Latte uses (chosen once, capped by
// the LATTE_ISA environment variable: ref|avx2|avx512|asimd|neon).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace latte {

// Ordered by preference within an architecture (higher is better).
// asimd comes after neon in value only to keep the older values.
enum class Isa { ref = 0, avx2 = 1, avx512 = 2, neon = 3, asimd = 4 };

const char* isa_name(Isa isa);
std::optional<Isa> parse_isa(std::string_view name);

// Compiled into this binary and runnable on this CPU.
//   avx2:   AVX2 + FMA + F16C
//   avx512: AVX-512 F/BW/VL/DQ + VNNI (+ the avx2 set)
//   asimd:  AArch64 ASIMD alone (ARMv8.0: Cortex-A53, A72), dot products emulated
//   neon:   AArch64 ASIMD + dot product (sdot, ARMv8.2's asimddp)
bool isa_supported(Isa isa);

// Every supported ISA, ref first: the loop tests and benchmarks run over.
std::vector<Isa> supported_isas();

// The ISA Latte uses: the best supported one, capped by LATTE_ISA. Computed
// once. Throws std::runtime_error naming the value if LATTE_ISA is not one of
// ref|avx2|avx512|asimd|neon.
Isa active_isa();

// Why active_isa() is slower than the best kernels Latte has for this
// architecture, or "" when it is that best: a LATTE_ISA cap below what the
// CPU runs, or a CPU without what the faster kernels need (no AVX2, FMA and
// F16C on x86; no dot products on ARM). For the runtime's log.
std::string slower_isa_note();

// The best supported ISA not above `cap` (ref if the cap is for the other
// architecture). Used by active_isa() and by tests forcing an ISA.
Isa best_isa_up_to(Isa cap);

}  // namespace latte
