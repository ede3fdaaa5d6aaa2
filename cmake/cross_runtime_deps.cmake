# The runtime's libraries for a cross build (aarch64 on an x86-64 Debian),
# from Debian's multiarch packages (scripts/setup.sh --cross installs them):
# libpcre2-dev:arm64 and libdnnl2:arm64 put their libraries in
# /usr/lib/<triplet>. Defines the targets the native build gets from
# find_package: PCRE2::pcre2-8, DNNL::dnnl, CLI11::CLI11.
#
# Headers: the host's /usr/include must not be on the include path (its C
# headers would shadow the cross toolchain's), so each library's headers are
# reached through the folder of links xsimd's come from
# (latte_cross_header_link, CMakeLists.txt).
# oneDNN: libdnnl-dev:arm64 cannot be installed beside libdnnl-dev:amd64 (they
# ship different dnnl_config.h at one path; the only difference is the GPU
# runtime, OpenCL on amd64), so the cross build compiles against the host's
# headers of the same version and links the arm64 library. The runtime calls
# only the C API's dnnl_sgemm, which that macro does not touch.
set(_triplet ${CMAKE_LIBRARY_ARCHITECTURE})
if(NOT _triplet)
  set(_triplet ${CMAKE_SYSTEM_PROCESSOR}-linux-gnu)
endif()
set(_libdir /usr/lib/${_triplet})

function(_latte_cross_lib var name)
  find_library(${var} NAMES ${name} PATHS ${_libdir} NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH)
  if(NOT ${var})
    message(FATAL_ERROR "cross build: ${name} for ${_triplet} not found in ${_libdir}; run scripts/setup.sh --cross")
  endif()
endfunction()

_latte_cross_lib(LATTE_CROSS_PCRE2 libpcre2-8.so)
_latte_cross_lib(LATTE_CROSS_DNNL libdnnl.so.2)
latte_cross_header_link(pcre2.h)
latte_cross_header_link(oneapi/dnnl)
latte_cross_header_link(CLI)

add_library(PCRE2::pcre2-8 UNKNOWN IMPORTED)
set_target_properties(PCRE2::pcre2-8 PROPERTIES IMPORTED_LOCATION ${LATTE_CROSS_PCRE2}
  INTERFACE_INCLUDE_DIRECTORIES ${LATTE_CROSS_INCLUDE} INTERFACE_COMPILE_DEFINITIONS PCRE2_CODE_UNIT_WIDTH=8)
add_library(DNNL::dnnl UNKNOWN IMPORTED)
set_target_properties(DNNL::dnnl PROPERTIES IMPORTED_LOCATION ${LATTE_CROSS_DNNL}
  INTERFACE_INCLUDE_DIRECTORIES ${LATTE_CROSS_INCLUDE})
add_library(CLI11::CLI11 INTERFACE IMPORTED)
set_target_properties(CLI11::CLI11 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${LATTE_CROSS_INCLUDE})
# The libraries' own dependencies (libgomp, libstdc++ for the target) are
# found at link time in the same folder, and by the binaries at run time.
add_link_options(-Wl,-rpath-link,${_libdir})
set(CMAKE_BUILD_RPATH ${_libdir})
