// The CLI's commands, one function each.
#pragma once

#include <cstdio>

namespace latte::cli {

// `latte info --models`: the cache accounting table of mla-spec.md section 2.
void print_model_cache_table(std::FILE* out);

struct DemoOptions {
  int n_prefill = 16;
  int n_decode = 8;
};
// `latte demo`: one MLA layer on random weights, naive versus absorbed.
int run_demo(const DemoOptions& opts);

}  // namespace latte::cli
