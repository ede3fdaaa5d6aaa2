# Finds PCRE2 (8-bit code units), Debian's libpcre2-dev, which ships no CMake
# package file. Defines PCRE2::pcre2-8.
find_path(PCRE2_INCLUDE_DIR pcre2.h)
find_library(PCRE2_LIBRARY NAMES pcre2-8)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(PCRE2 REQUIRED_VARS PCRE2_LIBRARY PCRE2_INCLUDE_DIR)
if(PCRE2_FOUND AND NOT TARGET PCRE2::pcre2-8)
  add_library(PCRE2::pcre2-8 UNKNOWN IMPORTED)
  set_target_properties(PCRE2::pcre2-8 PROPERTIES
    IMPORTED_LOCATION ${PCRE2_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${PCRE2_INCLUDE_DIR}
    INTERFACE_COMPILE_DEFINITIONS PCRE2_CODE_UNIT_WIDTH=8)
endif()
