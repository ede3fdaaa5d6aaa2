// Paths and program arguments for the tools (the CLI, the model writers):
// not the engine's, which never needs them (its files are opened by
// platform/). Latte's paths are UTF-8 strings on every OS: these turn them
// into what the OS takes (wide strings on Windows) and back, and say where
// the running program's file is, so an installed tool finds its data
// relative to itself (<prefix>/bin/latte -> <prefix>/share/latte/). Per OS,
// as platform/ does it: paths_posix.cpp, paths_windows.cpp.
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace latte {

// The absolute path of the running executable (UTF-8), or "" where the OS
// cannot say.
std::string executable_path();

// A UTF-8 path as std::filesystem takes it, and back.
std::filesystem::path path_from_utf8(const std::string& utf8);
std::string path_to_utf8(const std::filesystem::path& p);

// std::fopen of a UTF-8 path.
std::FILE* fopen_utf8(const std::string& path, const char* mode);

// The program's arguments as UTF-8 (Windows passes main() its ANSI code
// page's; POSIX systems pass the bytes given, UTF-8 on any current system).
std::vector<std::string> utf8_arguments(int argc, char** argv);

// Console text: make the console show UTF-8 as UTF-8 (Windows' console
// code page); nothing elsewhere.
void console_output_utf8();

}  // namespace latte
