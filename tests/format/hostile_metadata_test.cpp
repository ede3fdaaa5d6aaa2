// Files that parse as GGUF but carry hostile hyperparameters: every scalar
// metadata value of valid model files (random models of each architecture
// and layout, and llama.cpp's own test files) is overwritten in place with
// edge values of its type (0, 1, odd, the type's extremes; for floats also
// negative, tiny, huge, inf and NaN). Loading, opening a session (with the
// requested context and with the model's maximum), prefilling and decoding
// must then either refuse with latte::Error or produce finite logits: never
// a crash, another exception, or NaN/inf logits (silent garbage). A file
// refused at load is refused naming the key, or the tensor whose shape the
// value contradicts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "runtime/error.h"
#include "runtime/gguf/gguf_file.h"
#include "runtime/model/model.h"
#include "tools/random_model.h"
#include "runtime/session/session.h"
#include "runtime/model/vocab.h"
#include "runtime/tokenizer/chat.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tools/gguf_writer.h"
#include "tests/common/architecture_cases.h"

namespace latte {
namespace {

// Edge values for one scalar type, as the bytes stored in the file.
std::vector<std::vector<std::uint8_t>> edge_values(GgufValueType t) {
  std::vector<std::vector<std::uint8_t>> out;
  auto put = [&](auto v) {
    std::vector<std::uint8_t> b(sizeof(v));
    std::memcpy(b.data(), &v, sizeof(v));
    out.push_back(std::move(b));
  };
  auto ints = [&](auto zero) {
    using T = decltype(zero);
    using L = std::numeric_limits<T>;
    for (T v : {T(0), T(1), T(3), T(7), L::max(), T(L::max() / 2 + 1), L::min()}) put(v);
    if constexpr (L::is_signed) put(T(-1));
  };
  auto floats = [&](auto zero) {
    using T = decltype(zero);
    using L = std::numeric_limits<T>;
    for (T v : {T(0), T(-0.0), T(-1), T(1), T(1e-30), T(1e30), L::max(), L::infinity(), -L::infinity(),
                L::quiet_NaN()})
      put(v);
  };
  switch (t) {
    case GgufValueType::u8: ints(std::uint8_t{}); break;
    case GgufValueType::i8: ints(std::int8_t{}); break;
    case GgufValueType::u16: ints(std::uint16_t{}); break;
    case GgufValueType::i16: ints(std::int16_t{}); break;
    case GgufValueType::u32: ints(std::uint32_t{}); break;
    case GgufValueType::i32: ints(std::int32_t{}); break;
    case GgufValueType::u64: ints(std::uint64_t{}); break;
    case GgufValueType::i64: ints(std::int64_t{}); break;
    case GgufValueType::f32: floats(float{}); break;
    case GgufValueType::f64: floats(double{}); break;
    case GgufValueType::boolean: put(std::uint8_t{0}); put(std::uint8_t{1}); break;
    default: break;  // strings and arrays: the reader's tests and the fuzzer
  }
  return out;
}

std::string describe(const std::vector<std::uint8_t>& b, GgufValueType t) {
  auto get = [&](auto v) {
    std::memcpy(&v, b.data(), sizeof(v));
    return std::to_string(v);
  };
  switch (t) {
    case GgufValueType::u8: return get(std::uint8_t{});
    case GgufValueType::i8: return get(std::int8_t{});
    case GgufValueType::u16: return get(std::uint16_t{});
    case GgufValueType::i16: return get(std::int16_t{});
    case GgufValueType::u32: return get(std::uint32_t{});
    case GgufValueType::i32: return get(std::int32_t{});
    case GgufValueType::u64: return get(std::uint64_t{});
    case GgufValueType::i64: return get(std::int64_t{});
    case GgufValueType::f32: return get(float{});
    case GgufValueType::f64: return get(double{});
    case GgufValueType::boolean: return b[0] ? "true" : "false";
    default: return "?";
  }
}

// What one file did: refused at load (latte::Error), loaded and ran, or a
// defect (`problem` says which).
struct Outcome {
  bool loaded = false;
  std::string refusal;  // the load's error message, when refused
  int sessions_ran = 0;  // of 4 (2 contexts x 2 cache types)
  std::string problem;
};

// Loads, opens sessions (the requested context, then the model's maximum;
// f32 and int8 caches) and runs a few tokens through each.
Outcome exercise(std::vector<std::uint8_t> bytes) {
  Outcome r;
  try {
    GgufFile f = GgufFile::from_bytes(std::move(bytes));
    if (f.has("tokenizer.ggml.model")) {
      try {
        (void)Tokenizer::create(vocab_from_gguf(f));
      } catch (const Error&) {
      }
    }
    auto model = Model::from_file(std::move(f));
    r.loaded = true;
    const int n_vocab = model->params().n_vocab;
    for (std::int64_t n_ctx : {std::int64_t{32}, std::int64_t{0}}) {
      for (LatentStorage cache : {LatentStorage::f32, LatentStorage::int8}) {
        SessionOptions o;
        o.threads = 1;
        o.n_ctx = n_ctx;
        o.cache = cache;
        o.prefill_chunk = 4;
        try {
          Session s(model, o);
          std::vector<std::int32_t> prompt;
          for (int i = 0; i < 6; ++i) prompt.push_back((i * 37 + 11) % n_vocab);
          s.prefill(prompt);
          for (int step = 0; step < 2; ++step) s.decode((step * 53 + 5) % n_vocab);
          for (float x : s.logits())
            if (!std::isfinite(x)) {
              r.problem = "non-finite logits (n_ctx " + std::to_string(n_ctx) + ")";
              return r;
            }
          ++r.sessions_ran;
        } catch (const Error& e) {
          // Refused with a message (e.g. a context the machine cannot hold);
          // but a metadata value that makes NaN is for the loader to name.
          if (std::string(e.what()).find("overflow float32") != std::string::npos) {
            r.problem = std::string("caught only by the logits check: ") + e.what();
            return r;
          }
        }
      }
    }
  } catch (const Error& e) {
    if (!r.loaded) r.refusal = e.what();
  } catch (const std::exception& e) {
    r.problem = std::string("exception other than latte::Error: ") + e.what();
  }
  return r;
}

void check_file(const std::vector<std::uint8_t>& good, const std::string& name) {
  const Outcome base = exercise(good);
  ASSERT_EQ(base.problem, "") << name << " unmodified";
  ASSERT_EQ(base.sessions_ran, 4) << name << " unmodified";
  const GgufFile f = GgufFile::from_memory(good.data(), good.size());  // views into `good`
  int tried = 0, refused = 0, ran = 0;
  std::vector<std::string> failures;
  for (const GgufKv& kv : f.kvs()) {
    for (const auto& v : edge_values(kv.value.type)) {
      ASSERT_EQ(v.size(), kv.value.bytes);
      std::vector<std::uint8_t> b = good;
      std::memcpy(b.data() + (kv.value.data - good.data()), v.data(), v.size());
      ++tried;
      const Outcome o = exercise(std::move(b));
      refused += !o.loaded;
      // A refusal names the key, or the tensor whose shape the value
      // contradicts ("MLA config: d_model must be > 0" named neither).
      if (!o.loaded && o.refusal.find(kv.key) == std::string::npos && o.refusal.find("tensor '") == std::string::npos)
        failures.push_back(std::string(kv.key) + " = " + describe(v, kv.value.type) +
                           ": refused naming neither the key nor a tensor: " + o.refusal);
      ran += o.sessions_ran > 0;
      if (!o.problem.empty())
        failures.push_back(std::string(kv.key) + " = " + describe(v, kv.value.type) + ": " + o.problem);
    }
  }
  // Both outcomes occur: the edits reach the checks, and not every edit is
  // fatal (a rope base of 1, an unused key).
  EXPECT_GT(tried, 100) << name;
  EXPECT_GT(refused, tried / 4) << name;
  EXPECT_GT(ran, tried / 10) << name;
  ::testing::Test::RecordProperty(name + " tried", tried);
  ::testing::Test::RecordProperty(name + " refused", refused);
  ::testing::Test::RecordProperty(name + " ran", ran);
  std::string all;
  for (const auto& s : failures) all += "\n  " + s;
  EXPECT_TRUE(failures.empty()) << name << ":" << all;
}

// Every architecture and layout's random-weight file.
class HostileMetadataArch : public ::testing::TestWithParam<test::ArchCase> {};

TEST_P(HostileMetadataArch, RefusedOrFinite) {
  check_file(random_model_bytes(GetParam().spec), GetParam().name);
}

INSTANTIATE_TEST_SUITE_P(RandomModels, HostileMetadataArch, ::testing::ValuesIn(test::architecture_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

// llama.cpp's own files: a real tokenizer's keys too. One test per file, so
// that ctest runs them side by side (the slowest tests of the ASan build).
class HostileMetadataLlamaCpp : public ::testing::TestWithParam<const char*> {};

TEST_P(HostileMetadataLlamaCpp, RefusedOrFinite) {
  const char* name = GetParam();
  std::ifstream in(std::string(LATTE_TESTDATA_DIR) + "/" + name, std::ios::binary);
  ASSERT_TRUE(in) << name;
  const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  check_file(bytes, name);
}

INSTANTIATE_TEST_SUITE_P(LlamaCppFiles, HostileMetadataLlamaCpp,
                         ::testing::Values("tiny-dense.gguf", "tiny-moe-v2-lite.gguf"), [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-' || c == '.') c = '_';
                           return n;
                         });

// A NaN in the weights (one token's embedding row) is refused when it
// reaches the logits, and the call is forgotten (tokens and logits): the
// session goes on as if the call had not happened. Every architecture and layout (F32 and
// Q8_0 weights), f32 and int8 caches, decode and prefill in both forms: no
// sanitizer report, no finite garbage.
TEST(HostileWeights, NanLogitsAreRefusedAndForgotten) {
  const int bad_token = 42;
  for (const test::ArchCase& c : test::architecture_cases()) {
    // A tied output reads every embedding row at every position.
    if (c.spec.tied_output) continue;
    auto model = Model::from_file(GgufFile::from_bytes(test::model_with_nan_embedding(c.spec, bad_token)));
    for (LatentStorage cache : {LatentStorage::f32, LatentStorage::int8}) {
      for (MlaForm form : {MlaForm::naive, MlaForm::absorbed}) {
        SCOPED_TRACE(std::string(c.name) + (cache == LatentStorage::int8 ? ", int8" : ", f32") +
                     (form == MlaForm::naive ? ", naive" : ", absorbed"));
        SessionOptions o;
        o.threads = 1;
        o.n_ctx = 32;
        o.cache = cache;
        o.prefill_form = form;
        Session a(model, o), b(model, o);
        const std::vector<std::int32_t> good = {5, 7, 11};
        a.prefill(good);
        b.prefill(good);
        // Decode: refused, named, and forgotten.
        try {
          a.decode(bad_token);
          ADD_FAILURE() << "a NaN embedding gave finite logits";
        } catch (const Error& e) {
          EXPECT_EQ(e.status(), Status::bad_file);
          EXPECT_NE(std::string(e.what()).find("at position 3 is nan"), std::string::npos) << e.what();
        }
        EXPECT_EQ(a.n_past(), 3);
        // ... logits included: those of the prefill before it.
        ASSERT_EQ(a.logits().size(), b.logits().size());
        for (std::size_t i = 0; i < a.logits().size(); ++i) ASSERT_EQ(a.logits()[i], b.logits()[i]) << i;
        // Prefill with the bad token in the middle, every position's logits asked.
        std::vector<float> all;
        const std::vector<std::int32_t> mixed = {13, bad_token, 17};
        try {
          a.prefill(mixed, &all);
          ADD_FAILURE() << "a NaN embedding in a prefill gave finite logits";
        } catch (const Error& e) {
          EXPECT_EQ(e.status(), Status::bad_file) << e.what();
          EXPECT_NE(std::string(e.what()).find("at position 4 is nan"), std::string::npos) << e.what();
        }
        EXPECT_EQ(a.n_past(), 3);
        // Afterwards the session matches one that never saw the bad token.
        a.decode(19);
        b.decode(19);
        ASSERT_EQ(a.logits().size(), b.logits().size());
        for (std::size_t i = 0; i < a.logits().size(); ++i) ASSERT_EQ(a.logits()[i], b.logits()[i]) << i;
      }
    }
  }
}

// The refusals name the key and say what is wrong with the value.
TEST(HostileMetadata, RefusalNamesTheKey) {
  const std::vector<std::uint8_t> good = random_model_bytes(RandomModelSpec{});  // deepseek2 with YaRN
  const GgufFile f = GgufFile::from_memory(good.data(), good.size());
  auto refusal = [&](const std::string& key, auto value) {
    const GgufKv* kv = f.find(key);
    EXPECT_NE(kv, nullptr) << key;
    if (!kv) return std::string();
    const GgufValue* v = &kv->value;
    EXPECT_EQ(v->bytes, sizeof(value)) << key;
    std::vector<std::uint8_t> b = good;
    std::memcpy(b.data() + (v->data - good.data()), &value, sizeof(value));
    try {
      (void)Model::from_file(GgufFile::from_bytes(std::move(b)));
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::bad_file) << key;
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  auto expect_has = [](const std::string& msg, const char* part) {
    EXPECT_NE(msg.find(part), std::string::npos) << "'" << msg << "' lacks '" << part << "'";
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  expect_has(refusal("deepseek2.rope.scaling.yarn_log_multiplier", nan),
             "deepseek2.rope.scaling.yarn_log_multiplier = nan must be finite");
  expect_has(refusal("deepseek2.attention.layer_norm_rms_epsilon", std::numeric_limits<float>::infinity()),
             "deepseek2.attention.layer_norm_rms_epsilon = inf must be finite and > 0");
  expect_has(refusal("deepseek2.context_length", std::uint32_t{0xffffffffu}),
             "deepseek2.context_length = 4294967295 is out of range");
  // Finite but overflowing once squared: the score scale is checked too.
  expect_has(refusal("deepseek2.rope.scaling.yarn_log_multiplier", 1e30f), "attention score scale");
}

// Issue 55: a NUL byte in tokenizer.chat_template cut the refusal of an
// unknown template after its opening's first bytes, losing the reason and
// the --chat-format advice (the message is a C string). The opening is now
// quoted with escapes: NUL, control bytes and bytes that are not UTF-8 as C
// writes them, and a character the 60-byte limit would split left out.
TEST(HostileMetadata, AChatTemplateIsQuotedWhole) {
  const auto refusal = [](const std::string& tmpl) {
    RandomModelSpec spec;
    spec.edit_metadata = [tmpl](GgufWriter& w) { w.add_string("tokenizer.chat_template", tmpl); };
    auto model = Model::from_file(GgufFile::from_bytes(random_model_bytes(spec)));
    EXPECT_NE(model->tokenizer(), nullptr);
    EXPECT_EQ(model->tokenizer()->chat_template(), tmpl);
    try {
      (void)detect_chat_format(*model->tokenizer(), "deepseek2");
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::unsupported);
      return std::string(e.what());  // as a C string: up to a NUL
    }
    return std::string("accepted");
  };
  static const char kTemplate[] = "User: \0Assistant\x1b[2J\r\n\t\"x\\\x7f\xff";
  const std::string with_nul = refusal(std::string(kTemplate, sizeof kTemplate - 1));
  EXPECT_NE(with_nul.find("(tokenizer.chat_template: \"User: \\0Assistant\\x1b[2J\\r\\n\\t\\\"x\\\\\\x7f\\xff\") is "
                          "not one Latte recognizes"),
            std::string::npos)
      << with_nul;
  EXPECT_NE(with_nul.find("name the format with --chat-format"), std::string::npos) << with_nul;
  // 59 bytes, then a 2-byte character across the limit: left out whole.
  const std::string cut = refusal(std::string(59, 'a') + "\xC3\xA9" + "bbb");
  EXPECT_NE(cut.find("\"" + std::string(59, 'a') + "...\""), std::string::npos) << cut;
  const std::string whole = refusal(std::string(58, 'a') + "\xC3\xA9");
  EXPECT_NE(whole.find("\"" + std::string(58, 'a') + "\xC3\xA9\""), std::string::npos) << whole;
}

// A NaN row never enters the latent cache: the int8 kernel on AVX-512 could
// hide it from the logits (its exponentials are clamped), so a prefill with
// a bad token in the middle and no logits asked for went through, its NaN
// row then refused when the saved session was loaded; and the naive form's
// value product spread it to earlier positions, so the error named one
// before the bad token. Now the row is refused where it is made, by layer
// and position.
TEST(HostileWeights, NanRowsAreRefusedBeforeTheCache) {
  const int bad_token = 42;
  auto model = Model::from_file(GgufFile::from_bytes(test::model_with_nan_embedding(RandomModelSpec{}, bad_token)));
  std::vector<std::int32_t> good(40);
  for (int i = 0; i < 40; ++i) good[i] = 100 + i;
  for (LatentStorage cache : {LatentStorage::f32, LatentStorage::f16, LatentStorage::int8}) {
    for (MlaForm form : {MlaForm::naive, MlaForm::absorbed}) {
      SCOPED_TRACE(std::string(latent_storage_name(cache)) + (form == MlaForm::naive ? ", naive" : ", absorbed"));
      SessionOptions o;
      o.n_ctx = 64;
      o.cache = cache;
      o.prefill_form = form;
      Session s(model, o);
      s.prefill(good);
      for (bool all : {false, true}) {
        std::vector<float> logits;
        try {
          s.prefill(std::vector<std::int32_t>{5, 6, bad_token, 7, 8}, all ? &logits : nullptr);
          ADD_FAILURE() << "a NaN row went into the cache (all logits: " << all << ")";
        } catch (const Error& e) {
          EXPECT_EQ(e.status(), Status::bad_file);
          EXPECT_NE(std::string(e.what()).find("the latent row of layer 0 at position 42 is nan"), std::string::npos)
              << e.what();
        }
        EXPECT_EQ(s.n_past(), 40);
      }
    }
  }
}

}  // namespace
}  // namespace latte
