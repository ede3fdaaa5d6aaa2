// libFuzzer target for the tokenizer a GGUF file's vocabulary builds: the
// input describes a VocabSpec (model, pre-tokenizer, tokens, types, scores,
// merges, special ids, flags) and a text. Tokenizer::create must accept it or
// refuse it with latte::Error; an accepted tokenizer must encode the text in
// every mode (or refuse with latte::Error), give ids in range, decode them,
// stream their pieces as valid UTF-8, and, for a vocabulary with every byte
// and nothing special in it, give back the text it encoded. Anything else (a
// crash, a sanitizer report, another exception, a broken invariant) is a bug.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/error.h"
#include "runtime/tokenizer/pretokenizer.h"
#include "runtime/tokenizer/tokenizer.h"

namespace {

using latte::Error;
using latte::Tokenizer;
using latte::TokenType;
using latte::VocabSpec;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "tokenizer_fuzz: %s\n", what);
  std::abort();
}

bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = latte::detail::utf8_valid_prefix_len(s.substr(i));
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// The token a byte is written as: gpt2 maps it into GPT-2's alphabet, llama
// names it <0xXX>.
std::string byte_token(bool gpt2, unsigned char b) {
  std::string s;
  if (gpt2) {
    latte::detail::append_utf8(s, latte::gpt2_byte_to_codepoint(b));
  } else {
    s = latte::hex_byte_token(b);
  }
  return s;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  for (const std::string& x : v)
    if (x == s) return true;
  return false;
}

const char* const kPre[] = {"", "default", "deepseek-llm", "deepseek-v3", "qwen2", "deepseek-r1-qwen", "gpt-2"};

struct Built {
  VocabSpec spec;
  // Every byte has its token, no token is special and (llama) the byte tokens
  // are typed byte: encoding then loses nothing, so decode(encode(s)) gives s.
  bool lossless = false;
};

Built build_spec(FuzzedDataProvider& in) {
  Built b;
  VocabSpec& v = b.spec;
  const int model = in.ConsumeIntegralInRange(0, 15);
  const bool gpt2 = model < 8;
  v.model = model < 8 ? "gpt2" : model < 15 ? "llama" : in.ConsumeRandomLengthString(8);
  const int pre = in.ConsumeIntegralInRange(0, 7);
  v.pre = pre < 7 ? kPre[pre] : in.ConsumeRandomLengthString(16);

  const bool all_bytes = in.ConsumeBool();
  if (all_bytes)
    for (int c = 0; c < 256; ++c) v.tokens.push_back(byte_token(gpt2, static_cast<unsigned char>(c)));
  const int n_random = in.ConsumeIntegralInRange(0, 24);
  for (int i = 0; i < n_random; ++i) v.tokens.push_back(in.ConsumeRandomLengthString(12));
  // Merges of existing tokens, their result added to the vocabulary (so most
  // are valid), and now and then a raw one.
  const int n_merges = in.ConsumeIntegralInRange(0, 32);
  for (int i = 0; i < n_merges && !v.tokens.empty(); ++i) {
    if (in.ConsumeIntegralInRange(0, 15) == 0) {
      v.merges.push_back(in.ConsumeRandomLengthString(12));
      continue;
    }
    const auto last = v.tokens.size() - 1;
    const std::string l = v.tokens[in.ConsumeIntegralInRange<std::size_t>(0, last)];
    const std::string r = v.tokens[in.ConsumeIntegralInRange<std::size_t>(0, last)];
    v.merges.push_back(l + " " + r);
    if (!contains(v.tokens, l + r)) v.tokens.push_back(l + r);
  }
  const std::size_t n = v.tokens.size();

  // Types: none (all normal), the clean kind, or arbitrary (0..7: 7 is invalid).
  const int types = in.ConsumeIntegralInRange(0, 2);
  bool special = false;
  if (types == 1 || types == 2) {
    for (std::size_t i = 0; i < n; ++i) {
      const bool is_byte = !gpt2 && v.tokens[i].size() == 6 && v.tokens[i].rfind("<0x", 0) == 0;
      std::int32_t t = is_byte ? 6 : 1;
      if (types == 2) t = in.ConsumeIntegralInRange(0, 7);
      special |= t != (is_byte ? 6 : 1);
      v.token_types.push_back(t);
    }
  }
  // Scores: none, one per token, or a wrong count.
  const int scores = in.ConsumeIntegralInRange(0, 2);
  if (scores > 0) {
    const std::size_t k = scores == 1 ? n : in.ConsumeIntegralInRange<std::size_t>(0, n + 1);
    for (std::size_t i = 0; i < k; ++i)
      v.scores.push_back(in.ConsumeBool() ? in.ConsumeFloatingPoint<float>()
                                          : static_cast<float>(in.ConsumeIntegralInRange(-64, 64)));
  }
  // A special id: mostly none (-1, also what an exhausted input gives) or a
  // valid one, now and then out of range.
  const auto id = [&]() -> std::int32_t {
    const int pick = in.ConsumeIntegralInRange(0, 7);
    if (pick == 0 || n == 0) return -1;
    if (pick == 1) return -2;
    if (pick == 2) return static_cast<std::int32_t>(n);
    return static_cast<std::int32_t>(in.ConsumeIntegralInRange<std::size_t>(0, n - 1));
  };
  v.bos_id = id();
  v.eos_id = id();
  v.unk_id = id();
  v.pad_id = id();
  if (in.ConsumeBool()) v.eot_ids.push_back(id());
  v.add_bos = in.ConsumeBool();
  v.add_space_prefix = in.ConsumeBool();
  // (llama: without types its <0xXX> tokens are normal text, not bytes.)
  b.lossless = all_bytes && !special && (gpt2 || !v.token_types.empty());
  return b;
}

void check_encoding(const Tokenizer& tok, const Built& b, const std::string& text, bool add_bos,
                    bool parse_special) {
  std::vector<std::int32_t> ids;
  try {
    ids = tok.encode(text, add_bos, parse_special);
  } catch (const Error&) {
    // Allowed refusals: BOS asked of a vocab without one; a llama vocab
    // missing a byte's token with no unknown token.
    if (b.lossless && (!add_bos || tok.bos_id() >= 0)) fail("a lossless vocabulary refused to encode");
    return;
  }
  for (std::int32_t id : ids)
    if (id < 0 || id >= tok.n_vocab()) fail("encode gave an id out of range");
  if (add_bos && (ids.empty() || ids[0] != tok.bos_id())) fail("add_bos did not put BOS first");

  const std::string decoded = tok.decode(ids);
  (void)tok.decode(ids, {.hide_control = true});
  std::string pieces, streamed;
  latte::Utf8StreamDecoder stream;
  for (std::int32_t id : ids) {
    const std::string p = tok.token_to_piece(id);
    pieces += p;
    streamed += stream.push(p);
    (void)tok.token_to_piece(id, true);
  }
  streamed += stream.flush();
  if (!valid_utf8(streamed)) fail("the streaming decoder let invalid UTF-8 through");
  if (valid_utf8(pieces) && streamed != pieces) fail("the streaming decoder changed valid UTF-8");

  if (b.lossless && !add_bos && !parse_special) {
    if (tok.kind() == Tokenizer::Kind::bpe) {
      if (decoded != latte::detail::sanitize_utf8(text)) fail("gpt2: decode(encode(text)) != text");
    } else if (text.find("\xE2\x96\x81") == std::string::npos) {
      // (U+2581 in the text is where SentencePiece writes a space: it comes
      // back as one.)
      if (decoded != text) fail("llama: decode(encode(text)) != text");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const Built b = build_spec(in);
  const std::string text = in.ConsumeRemainingBytesAsString();
  std::optional<Tokenizer> made;
  try {
    made.emplace(Tokenizer::create(b.spec));
  } catch (const Error&) {
    return 0;  // refused, with a message naming what is wrong
  }
  const Tokenizer& tok = *made;
  for (bool add_bos : {false, true})
    for (bool parse_special : {false, true}) check_encoding(tok, b, text, add_bos, parse_special);
  if (tok.kind() == Tokenizer::Kind::bpe) {
    std::size_t total = 0;
    for (const std::string& w : tok.pre_tokenize(text)) total += w.size();
    if (total != latte::detail::sanitize_utf8(text).size()) fail("pre_tokenize lost bytes");
  }
  return 0;
}
