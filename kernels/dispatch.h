// One ISA dispatch for every kernel family (as Highway's HWY_EXPORT does it):
// a family's header declares its per-ISA tables and its chooser with
//   LATTE_DECLARE_KERNEL_TABLES(family, Table)
// and its .cpp defines the chooser with
//   LATTE_DEFINE_KERNEL_DISPATCH(family, Table, ref_table)
// family##_kernels(isa) then returns the table compiled for isa (defined in
// <family>__<isa>.cpp as `const Table* family##_kernels_<isa>()`), the
// reference table for Isa::ref, and throws for an ISA this CPU does not run.
// ISAs this build leaves out (LATTE_HAVE_<ISA> undefined) fall back to ref;
// isa_supported() never offers them.
#pragma once

#include <stdexcept>
#include <string>

#include "kernels/isa.h"

namespace latte::kernels {

template <class Table>
using KernelTableGetter = const Table* (*)();

// The table for isa from the per-ISA getters (null where not compiled in).
template <class Table>
const Table& select_kernel_table(const char* family, Isa isa, const Table& ref, KernelTableGetter<Table> avx2,
                                 KernelTableGetter<Table> avx512, KernelTableGetter<Table> neon,
                                 KernelTableGetter<Table> asimd) {
  if (!isa_supported(isa))
    throw std::runtime_error(std::string(family) + ": ISA " + isa_name(isa) + " is not supported here");
  KernelTableGetter<Table> get = nullptr;
  switch (isa) {
    case Isa::avx2: get = avx2; break;
    case Isa::avx512: get = avx512; break;
    case Isa::neon: get = neon; break;
    case Isa::asimd: get = asimd; break;
    case Isa::ref: break;
  }
  return get ? *get() : ref;
}

}  // namespace latte::kernels

#define LATTE_DECLARE_KERNEL_TABLES(family, Table) \
  const Table* family##_kernels_avx2();           \
  const Table* family##_kernels_avx512();         \
  const Table* family##_kernels_neon();           \
  const Table* family##_kernels_asimd();          \
  const Table& family##_kernels(Isa isa)

#ifdef LATTE_HAVE_AVX2
#define LATTE_KERNEL_TABLE_AVX2(family) &family##_kernels_avx2
#else
#define LATTE_KERNEL_TABLE_AVX2(family) nullptr
#endif
#ifdef LATTE_HAVE_AVX512
#define LATTE_KERNEL_TABLE_AVX512(family) &family##_kernels_avx512
#else
#define LATTE_KERNEL_TABLE_AVX512(family) nullptr
#endif
#ifdef LATTE_HAVE_NEON
#define LATTE_KERNEL_TABLE_NEON(family) &family##_kernels_neon
#else
#define LATTE_KERNEL_TABLE_NEON(family) nullptr
#endif
#ifdef LATTE_HAVE_ASIMD
#define LATTE_KERNEL_TABLE_ASIMD(family) &family##_kernels_asimd
#else
#define LATTE_KERNEL_TABLE_ASIMD(family) nullptr
#endif

#define LATTE_DEFINE_KERNEL_DISPATCH(family, Table, ref)                                             \
  const Table& family##_kernels(Isa isa) {                                                           \
    return ::latte::kernels::select_kernel_table<Table>(                                             \
        #family, isa, ref, LATTE_KERNEL_TABLE_AVX2(family), LATTE_KERNEL_TABLE_AVX512(family),       \
        LATTE_KERNEL_TABLE_NEON(family), LATTE_KERNEL_TABLE_ASIMD(family));                          \
  }
