// generate.c's program over latte.hpp, compiled as C++17: the C++ wrapper
// must be usable from the oldest standard it promises, and give the same
// tokens. Usage: generate MODEL PROMPT N_PREDICT [SEED] (as generate.c):
// prints the generated token ids ("1,2,3") on one line, their text on the next.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "latte/latte.hpp"

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: generate MODEL PROMPT N_PREDICT [SEED]\n");
    return 2;
  }
  try {
    namespace api = latte::api;
    const api::Model model(argv[1]);
    latte_session_options so = latte_session_default_options();
    if (model.n_ctx_train() < so.n_ctx) so.n_ctx = model.n_ctx_train();
    api::Session session(model, so);
    const std::vector<api::Model::ChatMessage> turn = {{"user", argv[2]}};
    const std::vector<int32_t> prompt = model.chat_tokenize(turn, true);

    latte_sampler_options sp = latte_sampler_default_options();
    if (argc == 5) sp.seed = std::strtoull(argv[4], nullptr, 10);
    else sp.temperature = 0.0f;
    api::Sampler sampler(sp);
    for (int32_t t : prompt) sampler.accept(t);
    session.prefill(prompt);

    std::vector<int32_t> out;
    const int n_predict = std::atoi(argv[3]);
    while (static_cast<int>(out.size()) < n_predict) {
      const int32_t t = sampler.sample(session.logits());
      if (model.is_end_of_generation(t)) break;
      out.push_back(t);
      if (session.n_past() >= session.n_ctx()) break;
      session.decode(t);
    }
    for (std::size_t i = 0; i < out.size(); ++i) std::printf("%s%d", i ? "," : "", out[i]);
    std::printf("\n%s\n", model.detokenize(out, true).c_str());
  } catch (const latte::api::Exception& e) {
    std::fprintf(stderr, "generate: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {  // the standard library's own (bad_alloc, ...)
    std::fprintf(stderr, "generate: %s\n", e.what());
    return 1;
  }
  return 0;
}
