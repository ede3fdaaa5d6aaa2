// latte.hpp's calls that take a span also take a braced list, in C++17 (the
// wrapper's own Span) and C++20 (std::span), with the same results as the
// span forms: built in both standards (cmake/tests.cmake) and run on the
// shipped model. Exit status 0 when all holds, 1 with a message otherwise.
#include <cstdio>
#include <string>
#include <vector>

#include <latte/latte.hpp>

namespace {
int failures = 0;
void expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "wrapper_lists (C++%ld): %s\n", static_cast<long>(__cplusplus / 100 % 100), what);
    ++failures;
  }
}
}  // namespace

int main(int argc, char** argv) try {
  if (argc != 2) {
    std::fprintf(stderr, "usage: wrapper_lists MODEL.gguf\n");
    return 2;
  }
  latte::api::Model model(argv[1]);
  const std::vector<latte::api::Model::ChatMessage> chat = {{"user", "hi"}};
  expect(model.chat_tokenize({{"user", "hi"}}, true) == model.chat_tokenize(chat, true), "chat_tokenize({...})");
  expect(model.chat_apply({{"user", "hi"}}, true).text == model.chat_apply(chat, true).text, "chat_apply({...})");
  const std::vector<int32_t> ids = {1, 2, 3};
  expect(model.detokenize({1, 2, 3}) == model.detokenize(ids), "detokenize({...})");

  latte::api::Session a(model), b(model);
  a.prefill({1, 2, 3});
  b.prefill(ids);
  expect(a.tokens() == b.tokens() && a.n_past() == 3, "prefill({...})");
  const std::vector<float> la(a.logits().begin(), a.logits().end()), lb(b.logits().begin(), b.logits().end());
  expect(la == lb, "prefill({...}) logits");
  expect(a.eval_all({4, 5}) == b.eval_all(std::vector<int32_t>{4, 5}), "eval_all({...})");
  const int32_t last = a.tokens().back();
  expect(model.chat_tokenize_turn(last, {{"user", "again"}}) ==
             model.chat_tokenize_turn(last, std::vector<latte::api::Model::ChatMessage>{{"user", "again"}}),
         "chat_tokenize_turn({...})");
  return failures == 0 ? 0 : 1;
} catch (const latte::api::Exception& e) {
  std::fprintf(stderr, "wrapper_lists: %s\n", e.what());
  return 1;
}
