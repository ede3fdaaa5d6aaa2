# Reliability test targets (issue 41), included from CMakeLists.txt's test
# section: the allocation-failure test (its own binary: it replaces the global
# operator new) and, in a clang build with LATTE_FUZZ=ON, the libFuzzer
# targets that link the whole runtime: the C API's sessions and the session
# file loader (scripts/fuzz.sh builds and runs them).
# Uses latte_internal, latte_tools and the GTest variables (CMakeLists.txt).

option(LATTE_FUZZ "Build the libFuzzer targets that link the whole runtime (clang only)" OFF)

# The N-th allocation of each C API call fails; every failure must come back
# as LATTE_ERR_OUT_OF_MEMORY, the session unchanged and usable.
add_executable(test_alloc_fault ${PROJECT_SOURCE_DIR}/tests/reliability/alloc_fault_test.cpp)
target_link_libraries(test_alloc_fault PRIVATE latte_tools latte_internal ${LATTE_GTEST_MAIN})
add_test(NAME alloc_fault COMMAND test_alloc_fault)
set_tests_properties(alloc_fault PROPERTIES LABELS "runtime;reliability" TIMEOUT 300)

if(LATTE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "LATTE_FUZZ needs clang (libFuzzer)")
  endif()
  # Coverage of the runtime's own code guides the fuzzer.
  target_compile_options(latte_kernels PRIVATE -fsanitize=fuzzer-no-link)
  target_compile_options(latte_runtime_objects PRIVATE -fsanitize=fuzzer-no-link)
  # session_fuzz: call sequences on sessions; session_file_fuzz: the loader.
  foreach(target session_fuzz session_file_fuzz)
    add_executable(${target} ${PROJECT_SOURCE_DIR}/fuzz/${target}.cpp)
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer)
    target_link_options(${target} PRIVATE -fsanitize=fuzzer)
    target_link_libraries(${target} PRIVATE latte_tools latte_internal)
  endforeach()
endif()
