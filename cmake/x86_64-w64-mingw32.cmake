# Cross build for x86-64 Windows with Debian's mingw-w64 (the posix thread
# model, which GCC's OpenMP needs: g++-mingw-w64-x86-64-posix), run under wine.
# scripts/build_windows.sh configures with it and puts PCRE2, built for
# mingw, in LATTE_WINDOWS_DEPS (cmake/windows_runtime_deps.cmake).
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(_mingw x86_64-w64-mingw32)
set(CMAKE_C_COMPILER ${_mingw}-gcc-posix)
set(CMAKE_CXX_COMPILER ${_mingw}-g++-posix)
set(CMAKE_RC_COMPILER ${_mingw}-windres)
set(CMAKE_FIND_ROOT_PATH /usr/${_mingw})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# The GCC runtimes (libgcc, libstdc++, libgomp, winpthread) linked
# statically: latte.exe and latte.dll then need only Windows' own DLLs, so
# an app ships one file and wine needs no search path.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-static")
# FindOpenMP would name libgomp's import library (libgomp.dll.a): point it
# at the static one, which -static alone does not reach for a full path.
execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libgomp.a
                OUTPUT_VARIABLE _gomp OUTPUT_STRIP_TRAILING_WHITESPACE)
set(OpenMP_gomp_LIBRARY ${_gomp} CACHE FILEPATH "libgomp, static")
set(CMAKE_CROSSCOMPILING_EMULATOR wine)
