# Finds cpp-httplib as Debian's libcpp-httplib-dev ships it: a header, a
# shared library and a pkg-config file (cpp-httplib.pc), no CMake package
# file. Defines CppHttplib::CppHttplib and CppHttplib_FOUND. The compile
# definitions the library was built with (its OpenSSL/zlib/Brotli support)
# come from the .pc file: the header's classes change with them.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_CPPHTTPLIB QUIET cpp-httplib)
endif()
find_path(CppHttplib_INCLUDE_DIR httplib.h HINTS ${PC_CPPHTTPLIB_INCLUDE_DIRS})
find_library(CppHttplib_LIBRARY NAMES cpp-httplib HINTS ${PC_CPPHTTPLIB_LIBRARY_DIRS})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CppHttplib REQUIRED_VARS CppHttplib_LIBRARY CppHttplib_INCLUDE_DIR
                                  VERSION_VAR PC_CPPHTTPLIB_VERSION)
if(CppHttplib_FOUND AND NOT TARGET CppHttplib::CppHttplib)
  add_library(CppHttplib::CppHttplib UNKNOWN IMPORTED)
  set_target_properties(CppHttplib::CppHttplib PROPERTIES
    IMPORTED_LOCATION ${CppHttplib_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${CppHttplib_INCLUDE_DIR}
    INTERFACE_COMPILE_OPTIONS "${PC_CPPHTTPLIB_CFLAGS_OTHER}")
endif()
