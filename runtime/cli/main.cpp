// The `latte` command line (placeholder until the foundation lands).
#include <cstdio>
int main() { std::puts("latte"); return 0; }
