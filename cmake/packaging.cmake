# The Debian package (CPack's DEB generator; scripts/package.sh runs it): one
# package `latte` holding what `cmake --install` installs (the shared
# library, headers, latte.pc, the CMake package, the CLI, the shipped model)
# plus the copyright and changelog Debian policy asks for. Depends comes
# from dpkg-shlibdeps; the control files shlibs (what a package linking
# liblatte.so.0 depends on) and triggers (ldconfig, instead of maintainer
# scripts) are written here.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME latte)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "Latte developers")
set(CPACK_PACKAGE_CONTACT "Latte developers <latte@users.noreply.github.com>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Multi-Head Latent Attention inference on the CPU")
# Synopsis from the summary; CPack indents each line and writes " ." for the
# empty one.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "Latte runs MLA language models (DeepSeek-V2, V2-Lite, V3, MiniCPM3, PLM)
from GGUF files on x86-64 (AVX2, AVX-512) and aarch64 (NEON) CPUs,
keeping the per-token latent cache in f32, f16 or int8.

This package holds the shared library with its C API (latte.h, and the
header-only C++ wrapper latte.hpp), its pkg-config and CMake files, the
latte command-line program and a small demonstration model.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
if(CMAKE_CROSSCOMPILING AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE arm64)
endif()

# share/doc/latte: copyright and a gzipped changelog (Debian policy; lintian
# errors without them), made at configure time, installed by every install.
# The copyright file is machine-readable (DEP-5) and takes its notice and
# license text from LICENSE, so the two cannot differ.
set(_doc ${PROJECT_BINARY_DIR}/package-doc)
file(MAKE_DIRECTORY ${_doc})
file(READ ${PROJECT_SOURCE_DIR}/LICENSE _license)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/LICENSE)
string(FIND "${_license}" "Permission is hereby granted" _terms)
if(NOT _license MATCHES "Copyright \\(c\\) ([^\n]+)" OR _terms EQUAL -1)
  message(FATAL_ERROR "LICENSE: no 'Copyright (c) ...' line or MIT terms to write the Debian copyright file from")
endif()
set(LATTE_COPYRIGHT "${CMAKE_MATCH_1}")
string(SUBSTRING "${_license}" ${_terms} -1 _text)
string(STRIP "${_text}" _text)
# DEP-5 text: every line indented by one space, an empty one written " .".
string(REPLACE "\n\n" "\n.\n" _text "${_text}")
string(REPLACE "\n" "\n " LATTE_LICENSE_TEXT " ${_text}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/debian/copyright ${_doc}/copyright @ONLY)
string(TIMESTAMP _date "%a, %d %b %Y %H:%M:%S +0000" UTC)
file(WRITE ${_doc}/changelog "latte (${PROJECT_VERSION}) unstable; urgency=medium

  * Packaged from the source tree by scripts/package.sh.

 -- ${CPACK_PACKAGE_CONTACT}  ${_date}
")
find_program(LATTE_GZIP gzip REQUIRED)
execute_process(COMMAND ${LATTE_GZIP} -9nf ${_doc}/changelog)
install(FILES ${_doc}/copyright ${_doc}/changelog.gz DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/latte)
file(WRITE ${_doc}/shlibs "liblatte ${PROJECT_VERSION_MAJOR} latte (>= ${PROJECT_VERSION})\n")
file(WRITE ${_doc}/triggers "activate-noawait ldconfig\n")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${_doc}/shlibs ${_doc}/triggers)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# The package holds the default component: the copyright file stands in for
# LICENSE (install.cmake's "license" component), as Debian policy wants.
set(CPACK_INSTALL_CMAKE_PROJECTS "${PROJECT_BINARY_DIR};${PROJECT_NAME};Unspecified;/")
include(CPack)
