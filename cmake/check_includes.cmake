# The include rules the source layout states (docs/design.md), checked:
#   cmake -DSOURCE_DIR=<repo> -P cmake/check_includes.cmake
# - tools/cli/ is a client of latte.h like any app: it includes only
#   "latte/..." and "tools/..." (the tools' shared code), no engine header;
# - the engine (runtime/, kernels/, quant/, platform/) includes nothing of
#   tools/ (the tools' paths and output files are theirs alone);
# - kernels/ includes no thread pool (platform/thread_pool.h): the runtime
#   owns the threads and opens every region, kernels take ranges.
# Fails naming each file and include that breaks a rule.
set(_bad "")
file(GLOB _cli ${SOURCE_DIR}/tools/cli/*.cpp ${SOURCE_DIR}/tools/cli/*.h)
foreach(_f IN LISTS _cli)
  file(STRINGS ${_f} _lines REGEX "^[ \t]*#[ \t]*include[ \t]+\"")
  foreach(_l IN LISTS _lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]+\"([^\"]*)\".*" "\\1" _inc "${_l}")
    if(NOT _inc MATCHES "^(latte|tools)/")
      string(APPEND _bad "\n  ${_f}: #include \"${_inc}\" (tools/cli includes only latte/ and tools/)")
    endif()
  endforeach()
endforeach()
file(GLOB_RECURSE _engine ${SOURCE_DIR}/runtime/*.cpp ${SOURCE_DIR}/runtime/*.h ${SOURCE_DIR}/kernels/*.cpp
     ${SOURCE_DIR}/kernels/*.h ${SOURCE_DIR}/quant/*.cpp ${SOURCE_DIR}/quant/*.h ${SOURCE_DIR}/platform/*.cpp
     ${SOURCE_DIR}/platform/*.h)
foreach(_f IN LISTS _engine)
  file(STRINGS ${_f} _lines REGEX "^[ \t]*#[ \t]*include[ \t]+\"tools/")
  foreach(_l IN LISTS _lines)
    string(APPEND _bad "\n  ${_f}: ${_l} (the engine includes nothing of tools/)")
  endforeach()
endforeach()
file(GLOB_RECURSE _kernels ${SOURCE_DIR}/kernels/*.cpp ${SOURCE_DIR}/kernels/*.h)
foreach(_f IN LISTS _kernels)
  file(STRINGS ${_f} _lines REGEX "^[ \t]*#[ \t]*include[ \t]+\"platform/thread_pool\\.h\"")
  foreach(_l IN LISTS _lines)
    string(APPEND _bad "\n  ${_f}: ${_l} (kernels open no region: the runtime owns the threads)")
  endforeach()
endforeach()
if(_bad)
  message(FATAL_ERROR "include rules broken:${_bad}")
endif()
list(LENGTH _cli _n_cli)
list(LENGTH _engine _n_engine)
message(STATUS "include rules hold: ${_n_cli} CLI files, ${_n_engine} engine files")
