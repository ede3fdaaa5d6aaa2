# Fails if a per-ISA object file (kernels/*/*__<isa>.cpp) defines a global weak
# symbol (an inline function or template instance that the linker may pick for
# every caller) that is not tied to its ISA: an xsimd Arch instance, or a Latte
# Arch-templated instance. Such a copy, compiled with -mavx512f, would crash a
# CPU without AVX-512 when another file calls the same inline function.
# Strong global symbols must name their ISA too (the table entry points,
# `*_kernels_<isa>()`, reached only after the run-time ISA check): a helper
# with external linkage there would be callable from anywhere.
string(REPLACE "|" ";" objects "${OBJECTS}")
set(checked 0)
set(bad "")
set(strong "")
foreach(obj ${objects})
  if(NOT obj MATCHES "__(avx2|avx512|asimd|neon)\\.cpp\\.o$")
    continue()
  endif()
  set(isa ${CMAKE_MATCH_1})
  if(isa STREQUAL "avx2")
    set(tag "xsimd::fma3<xsimd::avx2>|xsimd::avx2|Avx2")
  elseif(isa STREQUAL "avx512")
    set(tag "xsimd::avx512|Avx512")
  else()
    # neon and asimd share xsimd's Arch (neon64) and their flags: Latte's
    # instances must sit in the ISA's own namespace (isa_neon, isa_asimd),
    # xsimd's are the same code in both objects.
    set(tag "latte::kernels::isa_${isa}::|^[^(]*xsimd::")
  endif()
  execute_process(COMMAND ${NM} -C --defined-only ${obj} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nm failed on ${obj}")
  endif()
  math(EXPR checked "${checked} + 1")
  string(REPLACE "\n" ";" lines "${out}")
  foreach(line ${lines})
    if(line MATCHES "^[0-9a-f]+ [WVu] (.*)$")
      set(sym "${CMAKE_MATCH_1}")
      # The C++ personality pointer is data the unwinder reads, not code.
      if(sym STREQUAL "DW.ref.__gxx_personality_v0")
        continue()
      endif()
      if(NOT sym MATCHES "${tag}")
        string(APPEND bad "\n  ${obj}: ${sym}")
      elseif(isa MATCHES "^(neon|asimd)$" AND NOT sym MATCHES "latte::kernels::isa_${isa}::" AND sym MATCHES "latte::")
        string(APPEND bad "\n  ${obj}: ${sym}")
      endif()
    elseif(line MATCHES "^[0-9a-f]+ [TDBR] (.*)$")
      set(sym "${CMAKE_MATCH_1}")
      if(NOT sym MATCHES "_${isa}\\(\\)$" AND NOT sym MATCHES "${tag}")
        string(APPEND strong "\n  ${obj}: ${sym}")
      endif()
    endif()
  endforeach()
endforeach()
if(checked EQUAL 0)
  message(FATAL_ERROR "no per-ISA object files found in: ${OBJECTS}")
endif()
if(bad)
  message(FATAL_ERROR "per-ISA objects export weak symbols not tied to their ISA:${bad}")
endif()
if(strong)
  message(FATAL_ERROR "per-ISA objects define global symbols that do not name their ISA:${strong}")
endif()
message(STATUS "checked ${checked} per-ISA object files: clean")
