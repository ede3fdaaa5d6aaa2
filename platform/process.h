// Process-wide preparations (platform layer, process.cpp).
#pragma once

namespace latte {

// Makes sure the C library's unwinder (libgcc_s, which glibc loads on first
// need) is loaded now: loaded late, under a memory limit, its load fails and
// a C++ exception passing through C code (pthread_once in oneDNN) aborts the
// process instead of unwinding. Cheap after the first call; nothing to do
// outside glibc (the unwinder is linked in, or loaded with the program).
void preload_unwinder();

}  // namespace latte
