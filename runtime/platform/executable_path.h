// Where the running program's file is, so an installed tool finds its data
// relative to itself (<prefix>/bin/latte -> <prefix>/share/latte/).
#pragma once

#include <string>

namespace latte {

// The absolute path of the running executable, or "" where the OS cannot say.
std::string executable_path();

}  // namespace latte
