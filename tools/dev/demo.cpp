// `latte demo`: the MLA layer itself, without a model file: one layer at
// DeepSeek-V2-Lite shapes with random weights, run in the naive and absorbed
// forms from the same weights, their agreement, the form the cost model
// picks, and what the latent cache saves.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "tools/cli/commands.h"
#include "tools/dev/dev_commands.h"
#include "tools/dev/dev_errors.h"
#include "runtime/mla/cost_model.h"
#include "reference/mla_reference.h"

namespace latte::cli {

static int demo(const DemoOptions& opts);

int run_demo(const DemoOptions& opts) {
  return as_api_errors([&] { return demo(opts); });
}

static int demo(const DemoOptions& opts) {
  MlaConfig cfg;
  cfg.d_model = 2048;
  cfg.n_heads = 16;
  cfg.kv_lora_rank = 512;
  cfg.d_nope = 128;
  cfg.d_rope = 64;
  cfg.d_v = 128;
  cfg.rope.dim = 64;
  cfg.rope.yarn = true;
  cfg.rope.yarn_factor = 40;
  cfg.rope.yarn_orig_ctx = 4096;
  cfg.rope.yarn_log_multiplier = 0.0707;

  std::printf("latte demo: ONE MLA layer with RANDOM weights (for text, `latte run` uses the shipped model)\n"
              "at DeepSeek-V2-Lite shapes (d 2048, 16 heads, d_c 512, d_R 64, nope 128, v 128),\n"
              "scalar reference, %d prefill tokens then %d decode steps.\n\n",
              opts.n_prefill, opts.n_decode);
  const auto w = MlaLayerWeights::random(cfg, 1);
  const int n = opts.n_prefill + opts.n_decode;
  std::mt19937_64 rng(2);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> x(static_cast<std::size_t>(n) * cfg.d_model);  // (n, d)
  for (auto& v : x) v = dist(rng);
  std::vector<std::int64_t> pos(n);
  for (int i = 0; i < n; ++i) pos[i] = i;

  std::vector<float> outs[2];
  for (MlaForm form : {MlaForm::naive, MlaForm::absorbed}) {
    auto& out = outs[form == MlaForm::absorbed];
    out.resize(x.size());
    MlaReferenceCache cache;
    const auto t0 = std::chrono::steady_clock::now();
    mla_reference_forward(cfg, w, form, x.data(), opts.n_prefill, pos.data(), cache, out.data());
    const auto t1 = std::chrono::steady_clock::now();
    for (int t = opts.n_prefill; t < n; ++t)
      mla_reference_forward(cfg, w, form, x.data() + static_cast<std::size_t>(t) * cfg.d_model, 1,
                            &pos[t], cache, out.data() + static_cast<std::size_t>(t) * cfg.d_model);
    const auto t2 = std::chrono::steady_clock::now();
    std::printf("%-9s prefill %7.1f ms, decode %7.1f ms/step  (scalar reference)\n",
                mla_form_name(form), std::chrono::duration<double, std::milli>(t1 - t0).count(),
                opts.n_decode ? std::chrono::duration<double, std::milli>(t2 - t1).count() / opts.n_decode : 0.0);
  }
  double err = 0, mag = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    err = std::max(err, std::fabs(double(outs[0][i]) - outs[1][i]));
    mag = std::max(mag, std::fabs(double(outs[0][i])));
  }
  std::printf("\nnaive vs absorbed: max |diff| / max |out| = %.2e (same function, two forms)\n", err / mag);

  for (auto [q, c] : {std::pair{1, 4096}, {512, 0}, {512, 16384}, {64, 16384}}) {
    const MlaCost cost = mla_attention_cost(cfg, q, c);
    std::printf("cost model: %4d query tokens over %5d cached: naive %.3g, absorbed %.3g madds -> %s\n",
                q, c, double(cost.naive), double(cost.absorbed),
                mla_form_name(mla_pick_form(cfg, q, c)));
  }
  std::printf("\n");
  print_model_cache_table(stdout);
  return 0;
}

}  // namespace latte::cli
