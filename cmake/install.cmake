# Install rules (included from CMakeLists.txt when LATTE_INSTALL): the
# library and its headers, a CMake package exporting latte::latte, latte.pc,
# the CLI and the shipped model, laid out by GNUInstallDirs:
#   include/latte/{latte.h,latte.hpp}
#   <libdir>/liblatte.so.<major> (SONAME) and links, or <libdir>/liblatte.a
#   <libdir>/cmake/latte/latteConfig.cmake, latteConfigVersion.cmake, ...
#   <libdir>/pkgconfig/latte.pc
#   bin/latte, share/latte/latte-tiny-mla.gguf (found by bin/latte as ../share/latte)
#   share/doc/latte/LICENSE (MIT: the notice goes with every copy)
# Every path the package files hold is relative to where they are installed,
# so an installed tree (or an unpacked .deb) can be moved as a whole.
include(CMakePackageConfigHelpers)
set(LATTE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/latte)

install(TARGETS latte EXPORT latteTargets
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES include/latte/latte.h include/latte/latte.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/latte)
install(EXPORT latteTargets NAMESPACE latte:: DESTINATION ${LATTE_CMAKE_DIR})

# A static library's users link its dependencies too: the package finds them
# (PCRE2 through Latte's own find module, as Debian ships no CMake file).
if(LATTE_LIBRARY_TYPE STREQUAL "STATIC_LIBRARY")
  set(LATTE_STATIC ON)
  install(FILES cmake/FindPCRE2.cmake DESTINATION ${LATTE_CMAKE_DIR})
else()
  set(LATTE_STATIC OFF)
endif()
configure_package_config_file(cmake/latteConfig.cmake.in ${PROJECT_BINARY_DIR}/latteConfig.cmake
  INSTALL_DESTINATION ${LATTE_CMAKE_DIR})
# 0.x: a minor version may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/latteConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/latteConfig.cmake ${PROJECT_BINARY_DIR}/latteConfigVersion.cmake
  DESTINATION ${LATTE_CMAKE_DIR})

# latte.pc: prefix found from the file's own place (${pcfiledir}).
file(RELATIVE_PATH LATTE_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" LATTE_PC_TO_PREFIX "${LATTE_PC_TO_PREFIX}")
set(_pc_private -lstdc++ -lm)
if(CMAKE_THREAD_LIBS_INIT)
  list(APPEND _pc_private ${CMAKE_THREAD_LIBS_INIT})
endif()
if(LATTE_USE_ONEDNN)
  # oneDNN's GEMMs, and libgomp, whose OpenMP they run on (gemm_f32.cpp
  # calls it too); a build without oneDNN has no OpenMP at all.
  list(APPEND _pc_private -ldnnl)
  if(OpenMP_CXX_FLAGS MATCHES "fopenmp")
    list(APPEND _pc_private -lgomp)
  endif()
endif()
list(JOIN _pc_private " " _pc_libs_private)
# Only a static liblatte's users link its dependencies: a shared one's .pc
# names none, so it works where only their runtime packages are installed
# (the .deb's users, without libpcre2-dev).
if(LATTE_STATIC)
  set(LATTE_PC_PRIVATE "Libs.private: ${_pc_libs_private}\nRequires.private: libpcre2-8")
else()
  set(LATTE_PC_PRIVATE "")
endif()
set(LATTE_PC_CFLAGS "")
if(WIN32 AND NOT LATTE_STATIC)
  set(LATTE_PC_CFLAGS " -DLATTE_SHARED")
endif()
configure_file(cmake/latte.pc.in ${PROJECT_BINARY_DIR}/latte.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/latte.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# Its own component: the Debian package carries the license in its copyright
# file instead (packaging.cmake).
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/latte COMPONENT license)

if(LATTE_BUILD_CLI)
  install(TARGETS latte_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  if(EXISTS ${LATTE_SHIPPED_MODEL})
    install(FILES ${LATTE_SHIPPED_MODEL} DESTINATION ${CMAKE_INSTALL_DATADIR}/latte)
  endif()
endif()
