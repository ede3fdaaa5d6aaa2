// The `latte` command line.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>

#include "runtime/cli/commands.h"
#include "runtime/error.h"

int main(int argc, char** argv) {
  CLI::App app{"Latte: Multi-Head Latent Attention inference on the CPU"};
  app.require_subcommand(1);

  bool info_models = false;
  auto* info = app.add_subcommand("info", "Describe models and their latent-cache memory");
  info->add_flag("--models", info_models,
                 "Cache accounting for the public MLA models: latent versus MHA K/V");

  latte::cli::DemoOptions demo_opts;
  auto* demo = app.add_subcommand(
      "demo", "Run one MLA layer (DeepSeek-V2-Lite shapes, random weights) in both forms");
  demo->add_option("--tokens", demo_opts.n_prefill, "Prefill tokens")->check(CLI::Range(1, 4096));
  demo->add_option("--steps", demo_opts.n_decode, "Decode steps")->check(CLI::Range(0, 4096));

  CLI11_PARSE(app, argc, argv);
  try {
    if (*info) {
      if (!info_models) {
        std::fprintf(stderr, "latte info: say what to describe (--models)\n");
        return 2;
      }
      latte::cli::print_model_cache_table(stdout);
      return 0;
    }
    if (*demo) return latte::cli::run_demo(demo_opts);
  } catch (const latte::Error& e) {
    std::fprintf(stderr, "latte: %s: %s\n", latte::status_name(e.status()), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "latte: %s\n", e.what());
    return 1;
  }
  return 0;
}
