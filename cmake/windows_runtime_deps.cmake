# The runtime's libraries for the Windows cross build (mingw-w64 on Debian):
# PCRE2 built for mingw by scripts/build_windows.sh from Debian's source
# package into LATTE_WINDOWS_DEPS (a static library); CLI11 is header-only
# (the host's headers, through the cross-include links of CMakeLists.txt).
# oneDNN is not built for Windows here: LATTE_WITH_ONEDNN must be OFF.
# `latte serve`: cpp-httplib's header from Debian's source package, put in
# LATTE_WINDOWS_DEPS/include by build_windows.sh (upstream's header-only
# form; Debian ships only a Linux build), and nlohmann-json, header-only
# (the host's headers); the server is left out where httplib.h is not there.
# Defines the targets the native build gets from find_package:
# PCRE2::pcre2-8, CLI11::CLI11, and CppHttplib::CppHttplib and
# nlohmann_json::nlohmann_json where those are found.
if(NOT LATTE_WINDOWS_DEPS)
  message(FATAL_ERROR "Windows build: set LATTE_WINDOWS_DEPS to the PCRE2 built for mingw (scripts/build_windows.sh)")
endif()
if(LATTE_WITH_ONEDNN)
  message(FATAL_ERROR "Windows build: oneDNN is not available for mingw here; configure with -DLATTE_WITH_ONEDNN=OFF")
endif()
find_library(LATTE_WIN_PCRE2 NAMES libpcre2-8.a pcre2-8 PATHS ${LATTE_WINDOWS_DEPS}/lib NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH)
if(NOT LATTE_WIN_PCRE2 OR NOT EXISTS ${LATTE_WINDOWS_DEPS}/include/pcre2.h)
  message(FATAL_ERROR "Windows build: PCRE2 not found in ${LATTE_WINDOWS_DEPS}; run scripts/build_windows.sh")
endif()
latte_cross_header_link(CLI)

add_library(PCRE2::pcre2-8 STATIC IMPORTED)
# PCRE2_STATIC: the static library's declarations (no dllimport).
set_target_properties(PCRE2::pcre2-8 PROPERTIES IMPORTED_LOCATION ${LATTE_WIN_PCRE2}
  INTERFACE_INCLUDE_DIRECTORIES ${LATTE_WINDOWS_DEPS}/include
  INTERFACE_COMPILE_DEFINITIONS "PCRE2_CODE_UNIT_WIDTH=8;PCRE2_STATIC")
add_library(CLI11::CLI11 INTERFACE IMPORTED)
set_target_properties(CLI11::CLI11 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${LATTE_CROSS_INCLUDE})

if(EXISTS ${LATTE_WINDOWS_DEPS}/include/httplib.h AND EXISTS /usr/include/nlohmann/json.hpp)
  latte_cross_header_link(nlohmann)
  add_library(CppHttplib::CppHttplib INTERFACE IMPORTED)
  # Winsock; Windows 10's API (httplib needs Vista's at least).
  set_target_properties(CppHttplib::CppHttplib PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES ${LATTE_WINDOWS_DEPS}/include
    INTERFACE_LINK_LIBRARIES ws2_32
    INTERFACE_COMPILE_DEFINITIONS "_WIN32_WINNT=0x0A00")
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  set_target_properties(nlohmann_json::nlohmann_json PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${LATTE_CROSS_INCLUDE})
endif()
