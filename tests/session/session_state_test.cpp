// Saved sessions: a loaded session computes exactly what the saved one would
// have, for every cache type; every kind of bad file is refused by name and
// leaves the session as it was.
#include <gtest/gtest.h>
#if LATTE_TEST_POSIX  // FIFOs, umask and file modes
#include <sys/stat.h>
#include <unistd.h>
#endif

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <random>
#include <thread>
#include <string>
#include <vector>

#include "kernels/isa.h"
#include "kernels/matvec/matvec.h"
#include "quant/fp16.h"
#include "quant/latent_formats.h"
#include "platform/atomic_file.h"
#include "platform/read_only_file.h"
#include "runtime/error.h"
#include "runtime/mla/latent_cache.h"
#include "runtime/model/fingerprint.h"
#include "runtime/session/cache_bounds.h"
#include "tools/random_model.h"
#include "runtime/session/session.h"
#include "tests/common/architecture_cases.h"
#if LATTE_TEST_POSIX
#include "tests/common/fifo_util.h"
#endif
#include "tests/common/testdata.h"

namespace latte {
namespace {

using test::kTestdata;
using test::testdata_tokens;

std::vector<std::uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_bytes(const std::string& path, const std::vector<std::uint8_t>& b) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

std::vector<float> logits_of(const Session& s) { return {s.logits().begin(), s.logits().end()}; }

// n tokens: the test data's, repeated (a session past a 512-token int4 tile
// needs more than the 160 there are).
std::vector<std::int32_t> tokens_of(std::size_t n) {
  const auto data = testdata_tokens();
  std::vector<std::int32_t> t(n);
  for (std::size_t i = 0; i < n; ++i) t[i] = data[i % data.size()];
  return t;
}

// A session's setup with a full tile and a partial one of 12 tokens a layer:
// T + 12 tokens (140 with 128-token tiles, 524 with int4's 512-token ones,
// its first tile a full int4 one) in a context of 2T + 44 (300 with
// 128-token tiles); tokens holds one more, to decode after.
struct TwoTiles {
  int T, n;
  std::vector<std::int32_t> tokens;
  SessionOptions options;
};
TwoTiles two_tiles(LatentStorage st) {
  TwoTiles t;
  t.T = latent_cache_tile_tokens(st);
  t.n = t.T + 12;
  t.tokens = tokens_of(static_cast<std::size_t>(t.n) + 1);
  t.options.cache = st;
  t.options.threads = 2;
  t.options.n_ctx = 2 * t.T + 44;
  return t;
}

// Files in dir whose names start with prefix.
int files_in(const std::string& dir, const std::string& prefix) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) ++n;
  return n;
}

constexpr std::size_t kHeader = 72;  // a session file's header bytes (format versions 4 and 5)

// A file's checksum recomputed over altered bytes.
void reseal(std::vector<std::uint8_t>& b) {
  const std::uint64_t sum = Session::state_checksum(b.data(), b.size() - 8);
  std::memcpy(b.data() + b.size() - 8, &sum, 8);
}

// Expects load_state to throw `status` with `needle` in its message, and the
// session to keep its tokens and logits.
void expect_refused(Session& s, const std::string& path, Status status, const std::string& needle) {
  const std::vector<std::int32_t> tokens(s.tokens().begin(), s.tokens().end());
  const std::vector<float> logits = logits_of(s);
  const bool had = s.has_logits();
  try {
    s.load_state(path);
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
  EXPECT_EQ(std::vector<std::int32_t>(s.tokens().begin(), s.tokens().end()), tokens);
  EXPECT_EQ(s.n_past(), static_cast<std::int64_t>(tokens.size()));
  EXPECT_EQ(logits_of(s), logits);
  EXPECT_EQ(s.has_logits(), had);
}

class SessionState : public ::testing::TestWithParam<LatentStorage> {};

TEST_P(SessionState, LoadedSessionContinuesExactlyAsTheSavedOne) {
  auto model = Model::load(kTestdata + "/tiny-moe-v2-lite.gguf");
  // A full tile and 7 tokens of a partial last one (128-token tiles: 135
  // tokens; int4's 512-token tiles: 519), then 20 decoded.
  const int T = latent_cache_tile_tokens(GetParam());
  const int n = T + 7, end = n + 20;
  const auto tokens = tokens_of(static_cast<std::size_t>(end));
  SessionOptions o;
  o.cache = GetParam();
  o.threads = 2;
  o.n_ctx = 3 * T + 16;  // 400 tokens with 128-token tiles
  Session a(model, o);
  ASSERT_EQ(a.cache().config().tile_tokens, T);
  a.prefill(std::span(tokens).first(n));
  const std::string path = ::testing::TempDir() + "/state_" + latent_storage_name(GetParam()) + ".lsess";
  a.save_state(path);
  EXPECT_EQ(files_in(::testing::TempDir(), "state_" + std::string(latent_storage_name(GetParam())) + ".lsess."), 0)
      << "a temporary left behind";
  const auto at_save = logits_of(a);
  std::vector<std::vector<float>> want;
  for (int t = n; t < end; ++t) {
    a.decode(tokens[t]);
    want.push_back(logits_of(a));
  }

  Session b(model, o);
  b.prefill(std::span(tokens).first(7));  // whatever it held is replaced
  b.load_state(path);
  EXPECT_EQ(b.n_past(), n);
  EXPECT_TRUE(b.has_logits());
  EXPECT_EQ(std::vector<std::int32_t>(b.tokens().begin(), b.tokens().end()),
            std::vector<std::int32_t>(tokens.begin(), tokens.begin() + n));
  EXPECT_EQ(logits_of(b), at_save);
  for (int t = n; t < end; ++t) {
    b.decode(tokens[t]);
    ASSERT_EQ(logits_of(b), want[t - n]) << "position " << t;
  }
  // The file is the size the format says: header, tokens, logits, 2 tiles
  // per layer (int4: the second, not full, in int8's layout), checksum.
  if (GetParam() == LatentStorage::int4) {
    ASSERT_EQ(a.cache().stored_layout(n, 0).storage, LatentStorage::int4);
    ASSERT_EQ(a.cache().stored_layout(n, 1).storage, LatentStorage::int8);
  }
  const std::size_t tiles = static_cast<std::size_t>(model->params().n_layers) *
                            (a.cache().layout().bytes + a.cache().stored_layout(n, 1).bytes);
  EXPECT_EQ(std::filesystem::file_size(path), kHeader + 4 * static_cast<std::size_t>(n) +
                                                  4 * static_cast<std::size_t>(model->params().n_vocab) + tiles + 8);
}

INSTANTIATE_TEST_SUITE_P(Caches, SessionState,
                         ::testing::Values(LatentStorage::f32, LatentStorage::f16, LatentStorage::int8, LatentStorage::int4),
                         [](const auto& info) { return std::string(latent_storage_name(info.param)); });

TEST(SessionStateFile, EmptyAndTruncatedSessionsRoundTrip) {
  auto model = Model::load(kTestdata + "/tiny-dense.gguf");
  const auto tokens = testdata_tokens();
  SessionOptions o;
  o.n_ctx = 64;
  Session a(model, o), b(model, o);
  const std::string path = ::testing::TempDir() + "/state_empty.lsess";
  a.save_state(path);  // nothing in it
  b.prefill(std::span(tokens).first(5));
  b.load_state(path);
  EXPECT_EQ(b.n_past(), 0);
  EXPECT_FALSE(b.has_logits());
  // Truncated: the tokens are kept, the logits are not (they were the cut token's).
  a.prefill(std::span(tokens).first(20));
  a.truncate(12);
  EXPECT_FALSE(a.has_logits());
  EXPECT_EQ(a.tokens().size(), 12u);
  a.save_state(path);
  b.load_state(path);
  EXPECT_EQ(b.n_past(), 12);
  EXPECT_FALSE(b.has_logits());
  a.decode(tokens[12]);
  b.decode(tokens[12]);
  EXPECT_EQ(logits_of(a), logits_of(b));
  // truncate to the same length keeps the logits.
  a.truncate(13);
  EXPECT_TRUE(a.has_logits());
}

TEST(SessionStateFile, BadFilesAreRefusedByName) {
  auto model = Model::load(kTestdata + "/tiny-dense.gguf");
  const auto tokens = testdata_tokens();
  SessionOptions o;
  o.cache = LatentStorage::int8;
  o.n_ctx = 300;
  Session a(model, o);
  a.prefill(std::span(tokens).first(140));
  const std::string dir = ::testing::TempDir();
  const std::string good = dir + "/state_good.lsess";
  a.save_state(good);
  const std::vector<std::uint8_t> bytes = file_bytes(good);

  Session s(model, o);
  s.prefill(std::span(tokens).first(3));
  const std::string bad = dir + "/state_bad_" + test::process_tag() + ".lsess";
  expect_refused(s, dir + "/no_such.lsess", Status::io_error, "cannot open session file");
  expect_refused(s, dir, Status::io_error, "is a directory");
  write_bytes(bad, std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + 40));
  expect_refused(s, bad, Status::bad_file, "is not a Latte session (40 bytes)");
  std::vector<std::uint8_t> b = bytes;
  b[0] = 'X';
  write_bytes(bad, b);
  expect_refused(s, bad, Status::bad_file, "no LATTESES magic");
  // Another version: unsupported when the checksum vouches for the file,
  // corrupt when it does not (a damaged version field).
  b = bytes;
  b[8] = 9;
  write_bytes(bad, b);
  expect_refused(s, bad, Status::bad_file, "is corrupt: its checksum does not match");
  reseal(b);
  write_bytes(bad, b);
  expect_refused(s, bad, Status::unsupported, "format version 9; this build reads version 5");
  // Versions 2 and 3 named their model by its metadata and a few bytes of
  // each tensor, which a file of other weights matched: refused, saying why
  // and what to do (not "saved from another model").
  for (std::uint8_t old : {std::uint8_t{2}, std::uint8_t{3}}) {
    b = bytes;
    b[8] = old;
    reseal(b);
    write_bytes(bad, b);
    expect_refused(s, bad, Status::unsupported,
                   "format version " + std::to_string(old) + "; this build reads version 5: earlier versions named "
                   "their model by its metadata and a few bytes of each tensor");
    expect_refused(s, bad, Status::unsupported, "compute the session again (prefill its tokens) and save it");
  }
  // Truncated anywhere past the header, or with bytes appended.
  for (std::size_t cut : {std::size_t{100}, bytes.size() / 2, bytes.size() - 1}) {
    write_bytes(bad, std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(cut)));
    expect_refused(s, bad, Status::bad_file, "checksum does not match");
    expect_refused(s, bad, Status::bad_file, ": truncated, or its header damaged)");
  }
  b = bytes;
  b.push_back(0);
  write_bytes(bad, b);
  expect_refused(s, bad, Status::bad_file, ": trailing bytes, or its header damaged)");
  // A flipped bit in a tile, a token or a logit: the checksum.
  for (std::size_t at : {bytes.size() - 100, std::size_t{kHeader + 4 * 10}, std::size_t{kHeader + 4 * 140 + 8}}) {
    b = bytes;
    b[at] ^= 0x10;
    write_bytes(bad, b);
    expect_refused(s, bad, Status::bad_file, "checksum");
  }
  // A token outside the vocabulary, the checksum recomputed: named.
  b = bytes;
  const std::int32_t huge = 1 << 30;
  std::memcpy(b.data() + kHeader + 4 * 5, &huge, 4);
  reseal(b);
  write_bytes(bad, b);
  expect_refused(s, bad, Status::bad_file, "token 5 is 1073741824");
  // Another cache type, a context too small, another model.
  SessionOptions of16 = o;
  of16.cache = LatentStorage::f16;
  Session f16(model, of16);
  expect_refused(f16, good, Status::invalid_argument, "holds an int8 cache; this session's is f16");
  SessionOptions small = o;
  small.n_ctx = 100;
  Session short_ctx(model, small);
  expect_refused(short_ctx, good, Status::context_overflow, "holds 140 tokens; this session's context is 100");
  Session other(Model::load(kTestdata + "/tiny-moe-v2-lite.gguf"), o);
  expect_refused(other, good, Status::invalid_argument, "was saved from another model");
  // Every header byte damaged in turn, and bytes through the body: refused
  // as a bad file (the checksum is verified before any field is judged, so
  // a damaged fingerprint is not "another model", nor a damaged tile size
  // "unsupported"), never a crash or a load.
  std::vector<std::size_t> spots;
  for (std::size_t i = 0; i < kHeader; ++i) spots.push_back(i);
  for (std::size_t i = kHeader; i < bytes.size(); i += 997) spots.push_back(i);
  for (std::size_t at : spots) {
    for (std::uint8_t flip : {std::uint8_t{0x01}, std::uint8_t{0x80}, std::uint8_t{0xFF}}) {
      b = bytes;
      b[at] ^= flip;
      write_bytes(bad, b);
      try {
        s.load_state(bad);
        ADD_FAILURE() << "byte " << at << " ^ " << int(flip) << " loaded";
      } catch (const Error& e) {
        EXPECT_EQ(e.status(), Status::bad_file) << "byte " << at << " ^ " << int(flip) << ": " << e.what();
      }
      ASSERT_EQ(s.n_past(), 3) << "byte " << at;
    }
  }
  // Damage the checksum does not catch (it is recomputed): tokens, logits
  // and tiles altered at random. Each is refused by name, or loads and then
  // decodes to finite logits or the session's bad_file for non-finite ones,
  // never a crash (ASan and UBSan run this in scripts/test.sh).
  std::mt19937_64 rng(42);
  int refused = 0, loaded = 0;
  SessionOptions o1 = o;
  o1.threads = 1;
  Session t(model, o1);
  for (int it = 0; it < 120; ++it) {
    b = bytes;
    const int n_flips = 1 + static_cast<int>(rng() % 8);
    for (int f = 0; f < n_flips; ++f) {
      const std::size_t at = kHeader + rng() % (bytes.size() - kHeader - 8);
      const std::uint8_t kinds[] = {0xFF, 0x7F, 0x80, 0x00, static_cast<std::uint8_t>(rng())};
      b[at] = kinds[rng() % 5];
    }
    reseal(b);
    write_bytes(bad, b);
    t.reset();
    try {
      t.load_state(bad);
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::bad_file) << e.what();
      EXPECT_EQ(t.n_past(), 0);
      ++refused;
      continue;
    }
    ++loaded;
    try {
      t.decode(1);
      for (float v : t.logits()) ASSERT_TRUE(std::isfinite(v));
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::bad_file) << e.what();
      EXPECT_EQ(t.n_past(), 140);  // the refused step changed nothing
    }
  }
  EXPECT_GE(refused, 3);  // most damage lands in tile bytes, which any value may hold
  EXPECT_GE(loaded, 60);
  // The intact file still loads.
  s.load_state(good);
  EXPECT_EQ(s.n_past(), 140);
}

// Version 5 gave int4 tiles one latent scale per channel over the tile
// instead of one per token; nothing else changed. A version 4 file is read
// (its bytes are version 5's) unless its cache is int4, whose old tiles this
// build would misread: that is refused as unsupported, saying why, once the
// checksum vouches for the file (a damaged one is corrupt).
TEST(SessionStateFile, Version4IsReadButNotWithAnInt4Cache) {
  auto model = Model::load(kTestdata + "/tiny-dense.gguf");
  const std::string dir = ::testing::TempDir();
  const std::string saved = dir + "/state_v5_" + test::process_tag() + ".lsess";
  const std::string v4 = dir + "/state_v4_" + test::process_tag() + ".lsess";
  for (LatentStorage st : {LatentStorage::f32, LatentStorage::f16, LatentStorage::int8, LatentStorage::int4}) {
    SCOPED_TRACE(latent_storage_name(st));
    const TwoTiles tt = two_tiles(st);
    const int T = tt.T, n = tt.n;
    const auto& tokens = tt.tokens;
    const SessionOptions& o = tt.options;
    Session a(model, o);
    ASSERT_EQ(a.cache().config().tile_tokens, T);
    a.prefill(std::span(tokens).first(n));
    a.save_state(saved);
    const std::vector<std::uint8_t> bytes = file_bytes(saved);
    std::uint32_t version = 0;
    std::memcpy(&version, bytes.data() + 8, 4);
    ASSERT_EQ(version, 5u);
    std::vector<std::uint8_t> b = bytes;
    const std::uint32_t four = 4;
    std::memcpy(b.data() + 8, &four, 4);
    write_bytes(v4, b);  // the checksum not recomputed: a damaged version field
    Session s(model, o);
    s.prefill(std::span(tokens).first(3));
    expect_refused(s, v4, Status::bad_file, "is corrupt: its checksum does not match");
    reseal(b);
    write_bytes(v4, b);
    if (st == LatentStorage::int4) {
      expect_refused(s, v4, Status::unsupported, "format version 4 and an int4 cache; this build reads version 5");
      expect_refused(s, v4, Status::unsupported, "compute the session again (prefill its tokens) and save it");
      // The same session at version 5 loads: the version refuses it, not the cache.
      s.load_state(saved);
      EXPECT_EQ(s.n_past(), n);
      EXPECT_EQ(logits_of(s), logits_of(a));
      continue;
    }
    s.load_state(v4);
    EXPECT_EQ(s.n_past(), n);
    EXPECT_EQ(std::vector<std::int32_t>(s.tokens().begin(), s.tokens().end()),
              std::vector<std::int32_t>(tokens.begin(), tokens.begin() + n));
    EXPECT_EQ(logits_of(s), logits_of(a));
    a.decode(tokens[n]);
    s.decode(tokens[n]);
    EXPECT_EQ(logits_of(s), logits_of(a));
  }
  std::filesystem::remove(saved);
  std::filesystem::remove(v4);
}

#if LATTE_TEST_POSIX  // a FIFO
// A FIFO named as the session file: refused, where opening it waited for a
// writer forever and hung the caller's thread. In a child, under an alarm:
// without the check the test fails (SIGALRM) instead of hanging the run.
TEST(SessionStateFile, FifoIsRefusedWithoutBlocking) {
  const test::TempFifo fifo(::testing::TempDir() + "/state_" + test::process_tag() + ".fifo");
  test::expect_child_exits_0_unblocked([&] {
    auto model = Model::load(kTestdata + "/tiny-dense.gguf");
    SessionOptions o;
    o.threads = 1;
    Session s(model, o);
    const std::int32_t t[] = {1, 2, 3};
    s.prefill(t);
    expect_refused(s, fifo.path(), Status::io_error, "is not a regular file");
    return ::testing::Test::HasFailure() ? 2 : 0;
  });
}
#endif

// The temporary a save writes is close-on-exec, as the model's descriptor
// is: a host that forks and execs on another thread meanwhile must not hand
// it to the child (which would keep the file open past the save).
TEST(SessionStateFile, TheTemporaryIsCloseOnExec) {
  const std::string path = ::testing::TempDir() + "/cloexec_" + test::process_tag() + ".bin";
  AtomicFile f(path, "test", /*private_mode=*/true);
  EXPECT_FALSE(f.temp_inheritable());
}

// Session loads read through ReadOnlyFile: its descriptor is close-on-exec
// (std::ifstream's was not: a host forking and exec-ing on another thread
// during a load handed it to the child), and it judges the file it opened,
// not the path, so a FIFO is refused without waiting for a writer even when
// it takes the path's place after any check of the path.
TEST(ReadOnlyFile, IsCloseOnExecAndSizesTheFileItOpened) {
  const std::string path = ::testing::TempDir() + "/rof_" + test::process_tag() + ".bin";
  {
    AtomicFile f(path, "test", /*private_mode=*/true);
    f.write("0123456789", 10);
    f.commit(/*sync=*/false);
  }
  ReadOnlyFile f(path, "test file");
  EXPECT_FALSE(f.inheritable());
  EXPECT_EQ(f.size(), 10u);
  char buf[8] = {};
  f.seek(6);
  EXPECT_EQ(f.read(buf, sizeof buf), 4u);  // short only at the end
  EXPECT_EQ(std::string(buf, 4), "6789");
  EXPECT_EQ(f.read(buf, sizeof buf), 0u);
  std::remove(path.c_str());
  try {
    ReadOnlyFile d(::testing::TempDir(), "test dir");
    ADD_FAILURE() << "a directory was opened";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::io_error);
    EXPECT_NE(std::string(e.what()).find("test dir is a directory"), std::string::npos) << e.what();
  }
}

#if LATTE_TEST_POSIX  // a FIFO
TEST(ReadOnlyFile, FifoIsRefusedWithoutBlocking) {
  const test::TempFifo fifo(::testing::TempDir() + "/rof_" + test::process_tag() + ".fifo");
  test::expect_child_exits_0_unblocked([&] {
    try {
      ReadOnlyFile f(fifo.path(), "test fifo");
    } catch (const Error& e) {
      return std::string(e.what()).find("test fifo is not a regular file") != std::string::npos ? 0 : 3;
    }
    return 2;
  });
}
#endif

TEST(SessionStateFile, AnotherFileOfTheSameShapesIsAnotherModel) {
  RandomModelSpec spec;
  const std::string p1 = ::testing::TempDir() + "/fp_a.gguf", p2 = ::testing::TempDir() + "/fp_b.gguf";
  write_random_model(spec, p1);
  spec.seed = 2;  // the same shapes and metadata, other weights
  write_random_model(spec, p2);
  auto m1 = Model::load(p1), m2 = Model::load(p2), m1_again = Model::load(p1);
  EXPECT_NE(m1->fingerprint(), m2->fingerprint());
  EXPECT_EQ(m1->fingerprint(), m1_again->fingerprint());
  LoadOptions read;
  read.file = GgufLoad::read;
  EXPECT_EQ(Model::load(p1, read)->fingerprint(), m1->fingerprint());  // mapped or read, the same file
  SessionOptions o;
  o.n_ctx = 32;
  Session a(m1, o), b(m2, o);
  a.prefill(std::vector<std::int32_t>{1, 2, 3});
  const std::string path = ::testing::TempDir() + "/fp.lsess";
  a.save_state(path);
  expect_refused(b, path, Status::invalid_argument, "was saved from another model");
}

// Tiles from outside are checked row by row: a non-finite value or scale
// anywhere in a tile (written rows or not) is refused by layer, tile and row.
TEST(SessionStateFile, TilesWithNonFiniteValuesAreRefused) {
  for (LatentStorage st : {LatentStorage::f32, LatentStorage::f16, LatentStorage::int8, LatentStorage::int4}) {
    LatentCacheConfig c;
    c.n_layers = 2;
    c.d_c = 64;
    c.d_R = 16;
    c.max_tokens = 4 * latent_cache_tile_tokens(st);
    c.storage = st;
    LatentCache src(c);
    // A full tile and 2 tokens of the next (130 tokens with 128-token tiles;
    // 514 with int4's 512-token ones).
    const int T = src.config().tile_tokens, n = T + 2;
    ASSERT_EQ(T, latent_cache_tile_tokens(st));
    std::vector<float> kv(64, 0.5f), pe(16, -0.25f);
    for (int l = 0; l < 2; ++l)
      for (int t = 0; t < n; ++t) src.write(l, t, 1, kv.data(), pe.data());
    // The tiles as saved (an int4 cache's second, not full, in int8's layout).
    const std::size_t tb = src.layout().bytes;
    const LatentTileLayout& last = src.stored_layout(n, 1);
    if (st == LatentStorage::int4) {
      ASSERT_EQ(src.stored_layout(n, 0).storage, LatentStorage::int4);
      ASSERT_EQ(last.storage, LatentStorage::int8);
    }
    std::vector<std::uint8_t> tiles(src.stored_bytes(n));
    ASSERT_EQ(tiles.size(), tb + last.bytes);
    src.save_tiles(1, n, tiles.data());
    LatentCache ok(c);
    ok.load_tiles(0, n, tiles.data());
    std::vector<float> kv2(64), pe2(16);
    ok.read_row(0, n - 1, kv2.data(), pe2.data());
    EXPECT_EQ(kv2, kv) << latent_storage_name(st);
    // Row 72 of the second tile (token T + 72): past the n tokens, still checked.
    std::uint8_t* t1 = tiles.data() + tb;
    const float nan = std::nanf("");
    const int row = 72;
    if (st == LatentStorage::f32) std::memcpy(t1 + (static_cast<std::size_t>(row) * 80 + 3) * 4, &nan, 4);
    if (st == LatentStorage::f16) {
      const std::uint16_t inf = 0x7C00;
      std::memcpy(t1 + (static_cast<std::size_t>(row) * 80 + 3) * 2, &inf, 2);
    }
    if (latent_storage_quantized(st)) std::memcpy(t1 + last.scale_offset + 4 * row, &nan, 4);
    LatentCache refuse(c);
    try {
      refuse.load_tiles(0, n, tiles.data());
      ADD_FAILURE() << "no error for " << latent_storage_name(st);
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::bad_file);
      EXPECT_NE(std::string(e.what()).find("layer 0, tile 1, row 72: a "), std::string::npos) << e.what();
    }
    if (latent_storage_quantized(st)) {  // a negative scale, too
      const float neg = -1.0f;
      std::memcpy(t1 + last.scale_offset + 4 * row, &neg, 4);
      EXPECT_NE(latent_tile_problem(last, t1).find("row 72: a scale is -1"), std::string::npos);
    }
    EXPECT_EQ(latent_tile_problem(src.layout(), src.tile(0, 0)), "");
  }
}

// A file holds what the session holds and nothing else: the last tile's rows
// past n_past (a truncation's stale tokens) are written as zeros, so a
// session truncated to 12 tokens saves the bytes of one that only ever had
// them.
TEST(SessionStateFile, RowsPastTheTokensAreNotSaved) {
  auto model = Model::load(kTestdata + "/tiny-dense.gguf");
  const auto tokens = testdata_tokens();
  for (LatentStorage st : {LatentStorage::f32, LatentStorage::f16, LatentStorage::int8, LatentStorage::int4}) {
    SessionOptions o;
    o.n_ctx = 64;
    o.cache = st;
    Session a(model, o), b(model, o);
    a.prefill(std::span(tokens).first(12));
    b.prefill(std::span(tokens).first(12));
    for (int t = 12; t < 20; ++t) a.decode(tokens[t]);
    b.decode(tokens[12]);
    a.truncate(12);
    b.truncate(12);
    const std::string pa = ::testing::TempDir() + "/rows_a.lsess", pb = ::testing::TempDir() + "/rows_b.lsess";
    a.save_state(pa);
    b.save_state(pb);
    EXPECT_EQ(file_bytes(pa), file_bytes(pb)) << latent_storage_name(st);
  }
}

// A refused call (a NaN reached the logits) leaves its rows in the cache past
// n_past; the session goes on, and its saved file loads (it did not: the
// NaN rows were saved and then refused by the row check).
TEST(SessionStateFile, ASessionAfterARefusedCallSavesAndLoads) {
  const int bad_token = 42;
  auto model = Model::from_file(GgufFile::from_bytes(test::model_with_nan_embedding(RandomModelSpec{}, bad_token)));
  for (LatentStorage st : {LatentStorage::f32, LatentStorage::f16, LatentStorage::int8, LatentStorage::int4}) {
    SessionOptions o;
    o.threads = 1;
    o.n_ctx = 32;
    o.cache = st;
    Session a(model, o);
    a.prefill(std::vector<std::int32_t>{1, 2, 3, 4});
    EXPECT_THROW(a.prefill(std::vector<std::int32_t>{5, bad_token}), Error);
    ASSERT_EQ(a.n_past(), 4);
    const std::string path = ::testing::TempDir() + "/after_refusal.lsess";
    a.save_state(path);
    Session b(model, o);
    b.load_state(path);
    a.decode(7);
    b.decode(7);
    EXPECT_EQ(logits_of(a), logits_of(b)) << latent_storage_name(st);
  }
}

// minicpm3 rotates keys with its short or long RoPE factors by the session's
// context: a file saved under one set is refused by a session using the
// other (it loaded, and computed other logits than the saved session would
// have), and loads into one on the same side of the switch.
TEST(SessionStateFile, TheRopeFactorSetMustMatch) {
  test::ArchCase mc{};
  for (const test::ArchCase& c : test::architecture_cases())
    if (std::string(c.name) == "minicpm3") mc = c;
  ASSERT_NE(mc.name, nullptr);
  mc.spec.context_length = 48;  // the switch: short factors up to 48 tokens
  auto model = Model::from_file(GgufFile::from_bytes(random_model_bytes(mc.spec)));
  ASSERT_NE(model->rope_factors(true), model->rope_factors(false));
  SessionOptions o;
  o.threads = 1;
  o.n_ctx = 40;
  Session a(model, o);
  a.prefill(std::vector<std::int32_t>{1, 2, 3, 4, 5});
  const std::string path = ::testing::TempDir() + "/rope_set.lsess";
  a.save_state(path);
  SessionOptions longer = o;
  longer.n_ctx = 64;
  Session l(model, longer);
  expect_refused(l, path, Status::invalid_argument,
                 "keys were rotated with its short-context RoPE factor set; a context of 64 tokens uses its "
                 "long-context (the model switches above 48 tokens)");
  SessionOptions other_short = o;
  other_short.n_ctx = 48;
  Session b(model, other_short);
  // A set the model does not have (the checksum recomputed): the file's
  // fault, not the context's.
  const std::vector<std::uint8_t> bytes = file_bytes(path);
  const std::string bad = ::testing::TempDir() + "/rope_set_bad.lsess";
  for (std::uint32_t set : {0u, 3u}) {
    std::vector<std::uint8_t> d = bytes;
    std::memcpy(d.data() + 64, &set, 4);
    reseal(d);
    write_bytes(bad, d);
    expect_refused(b, bad, Status::bad_file,
                   "its RoPE factor set is " + std::to_string(set) +
                       ", but its model's are 1 (short-context) and 2 (long-context)");
  }
  b.load_state(path);
  a.decode(6);
  b.decode(6);
  EXPECT_EQ(logits_of(a), logits_of(b));
}

// A model with one RoPE factor set: a file naming set 1 or 2 was refused as
// a context on the other side of "the model switches above N tokens", a
// switch this model does not make.
TEST(SessionStateFile, ARopeSetTheModelLacksIsTheFilesFault) {
  auto model = Model::load(kTestdata + "/tiny-dense.gguf");
  SessionOptions o;
  o.threads = 1;
  o.n_ctx = 32;
  Session a(model, o);
  a.prefill(std::vector<std::int32_t>{1, 2, 3});
  const std::string path = ::testing::TempDir() + "/one_set.lsess";
  a.save_state(path);
  std::vector<std::uint8_t> b = file_bytes(path);
  ASSERT_EQ(b[64], 0);
  Session s(model, o);
  for (std::uint32_t set : {1u, 2u, 7u}) {
    std::memcpy(b.data() + 64, &set, 4);
    reseal(b);
    write_bytes(path, b);
    expect_refused(s, path, Status::bad_file,
                   "': its RoPE factor set is " + std::to_string(set) + ", but its model has a single set (0)");
    try {
      s.load_state(path);
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find("switches"), std::string::npos) << e.what();
    }
  }
}

// The checksum is no seal (anyone can recompute it): a file must hold only
// values its model can write. An int8 scale of 3e38 loaded, and every
// decode after it failed, blaming the model's weights; each such value is
// now refused at load by layer, tile, row (an int4 tile's latent scales: by
// latent channel) and field, for every cache type, and a value just inside
// the model's bound still loads.
TEST(SessionStateFile, ValuesItsModelCannotWriteAreRefused) {
  auto model = Model::load(kTestdata + "/tiny-dense.gguf");
  const int n_vocab = model->params().n_vocab;
  const CacheBound bound = cache_bound(*model, 1);
  // The bounds are the model's: finite, and far below what overflows.
  ASSERT_GT(bound.latent, 0);
  ASSERT_LT(bound.latent, 1e4);
  ASSERT_GT(bound.rope, 0);
  ASSERT_LT(bound.rope, 1e4);
  for (LatentStorage st : {LatentStorage::f32, LatentStorage::f16, LatentStorage::int8, LatentStorage::int4}) {
    SCOPED_TRACE(latent_storage_name(st));
    const TwoTiles tt = two_tiles(st);
    const int T = tt.T, n = tt.n;
    const auto& tokens = tt.tokens;
    const SessionOptions& o = tt.options;
    Session a(model, o);
    ASSERT_EQ(a.cache().config().tile_tokens, T);
    a.prefill(std::span(tokens).first(n));
    const std::string good = ::testing::TempDir() + "/values_good.lsess";
    a.save_state(good);
    const std::vector<std::uint8_t> bytes = file_bytes(good);
    const LatentTileLayout& lay = a.cache().layout();
    const int dc = lay.d_c;
    ASSERT_EQ(lay.tokens, T);
    // Layer 1's tiles: tile t's row r, as bytes of the file (an int4
    // cache's second tile, not full, in int8's layout).
    const std::size_t per_layer = a.cache().stored_bytes(n);
    ASSERT_EQ(per_layer, lay.bytes + a.cache().stored_layout(n, 1).bytes);
    const std::size_t head = kHeader + 4 * static_cast<std::size_t>(n) + 4 * static_cast<std::size_t>(n_vocab);
    const std::size_t layer1 = head + per_layer;
    ASSERT_EQ(bytes.size(), head + static_cast<std::size_t>(model->params().n_layers) * per_layer + 8);
    // The file with one field of layer 1 set to v (a scale's or a value's
    // bytes, as stored), resealed.
    const std::string bad = ::testing::TempDir() + "/values_bad_" + test::process_tag() + ".lsess";
    const auto with = [&](int tile, int row, int channel, float v) {
      std::vector<std::uint8_t> b = bytes;
      std::uint8_t* t = b.data() + layer1 + static_cast<std::size_t>(tile) * lay.bytes;
      if (latent_storage_quantized(st)) {  // channel 0: the row's latent scale (int8's layout only), 1: its rope scale
        const LatentTileLayout& tl = a.cache().stored_layout(n, tile);
        ASSERT_TRUE(channel == 1 || tl.storage == LatentStorage::int8) << "an int4 tile has no latent scale per row";
        const std::size_t so = channel == 0 ? tl.scale_offset : tl.rope_scale_offset;
        std::memcpy(t + so + 4 * static_cast<std::size_t>(row), &v, 4);
      } else if (st == LatentStorage::f32) {
        std::memcpy(t + 4 * (static_cast<std::size_t>(row) * (dc + lay.d_R) + channel), &v, 4);
      } else {
        const std::uint16_t h = f32_to_fp16(v);
        std::memcpy(t + 2 * (static_cast<std::size_t>(row) * (dc + lay.d_R) + channel), &h, 2);
      }
      reseal(b);
      write_bytes(bad, b);
    };
    // int4: the file with latent channel c's scale (f16) in layer 1's tile 0,
    // the full one, set to v.
    const auto with_channel_scale = [&](int c, float v) {
      const LatentTileLayout& tl = a.cache().stored_layout(n, 0);
      ASSERT_EQ(tl.storage, LatentStorage::int4);
      std::vector<std::uint8_t> b = bytes;
      const std::uint16_t h = f32_to_fp16(v);
      std::memcpy(b.data() + layer1 + tl.channel_scale_offset + 2 * static_cast<std::size_t>(c), &h, 2);
      reseal(b);
      write_bytes(bad, b);
    };
    Session s(model, o);
    s.prefill(std::span(tokens).first(3));
    const bool quantized = latent_storage_quantized(st), int4 = st == LatentStorage::int4;
    const int latent = quantized ? 0 : 3, rope = quantized ? 1 : dc + 2;
    const std::string where = "session file '" + bad + "': layer 1, tile 0, row 5 (token 5): ";
    const std::string where_channel = "session file '" + bad + "': layer 1, tile 0, latent channel 5: ";
    // The probe's value; and the largest f16 holds.
    const float huge = st == LatentStorage::f16 ? 65504.f : 3e38f;
    if (int4) {  // its latent scales are per channel over the tile, f16
      with_channel_scale(5, 65504.f);
      expect_refused(s, bad, Status::bad_file, where_channel + "its scale is 65504; this model's layer gives at most ");
    } else {
      with(0, 5, latent, huge);
      expect_refused(s, bad, Status::bad_file,
                     where + (quantized ? "its latent scale is 3e+38; this model's layer gives at most "
                                        : "latent value 3 is " + std::string(st == LatentStorage::f16 ? "65504" : "3e+38")));
    }
    with(0, 5, rope, huge);
    expect_refused(s, bad, Status::bad_file, where + (quantized ? "its rope scale is 3e+38" : "rope value 2 is "));
    with(1, n - T - 1, latent, std::nanf(""));  // the last token's row (int4: the filling tile, int8's layout)
    expect_refused(s, bad, Status::bad_file, "layer 1, tile 1, row 11 (token " + std::to_string(n - 1) + "): ");
    if (int4) {
      with_channel_scale(dc - 1, -1.f);
      expect_refused(s, bad, Status::bad_file,
                     "layer 1, tile 0, latent channel " + std::to_string(dc - 1) + ": its scale is -1;");
      with_channel_scale(0, std::nanf(""));
      expect_refused(s, bad, Status::bad_file, "layer 1, tile 0, latent channel 0: its scale is ");
    } else {
      with(0, 5, latent, -1.f);
      if (quantized) expect_refused(s, bad, Status::bad_file, where + "its latent scale is -1;");
    }
    // Just past the bound, and just inside it (the scale stands for 127 of
    // itself; int4's channel scale for 7, stored as f16: a normal one, whose
    // rounding (2^-11 of it at most) keeps both probes on their sides).
    const double unit = int4 ? 7.0 : quantized ? 127.0 : 1.0;
    const float inside = static_cast<float>(bound.latent / unit * 0.999);
    const float past = static_cast<float>(bound.latent / unit * 1.01);
    if (int4) {
      ASSERT_TRUE(inside >= 0x1p-14f && past < 65504.f) << inside << " " << past;
    }
    if (st != LatentStorage::f16 || past < 65504.f) {
      if (int4) with_channel_scale(5, past);
      else with(0, 5, latent, past);
      expect_refused(s, bad, Status::bad_file, int4 ? where_channel : where);
      if (int4) with_channel_scale(5, inside);
      else with(0, 5, latent, inside);
      Session t(model, o);
      EXPECT_NO_THROW(t.load_state(bad));
      EXPECT_EQ(t.n_past(), n);
    }
    // A row past the tokens holds what the format writes there: zeros.
    with(1, n - T + 3, latent, 0.5f);
    expect_refused(s, bad, Status::bad_file,
                   "layer 1, tile 1, row 15 (token " + std::to_string(n + 3) + "): past the " + std::to_string(n) +
                       " tokens, a row the format writes as zeros");
    // The file as saved loads, and continues as the saved session.
    s.load_state(good);
    a.decode(tokens[n]);
    s.decode(tokens[n]);
    EXPECT_EQ(logits_of(s), logits_of(a));
  }
}

// Issue 55: a copy of the model with 8 weights in the middle of
// blk.0.attn_kv_a_mqa edited had the original's fingerprint (metadata and
// tensor edges), so a session of the original loaded into it with status OK
// and went on with the other weights. Every byte of the file is hashed now.
TEST(SessionStateFile, AnEditedWeightAnywhereIsAnotherModel) {
  RandomModelSpec spec;  // F32 weights
  const std::vector<std::uint8_t> original = random_model_bytes(spec);
  std::vector<std::uint8_t> edited = original;
  const GgufFile f = GgufFile::from_memory(original.data(), original.size());
  const GgufTensor* kv = f.find_tensor("blk.0.attn_kv_a_mqa.weight");
  ASSERT_NE(kv, nullptr);
  ASSERT_EQ(kv->type, GgmlType::F32);
  const std::size_t mid = static_cast<std::size_t>(kv->data - original.data()) + kv->n_bytes / 2 / 4 * 4;
  for (int i = 0; i < 8; ++i) {
    const float v = 50.f;
    std::memcpy(edited.data() + mid + 4 * static_cast<std::size_t>(i), &v, 4);
  }
  const std::string p1 = ::testing::TempDir() + "/edit_a.gguf", p2 = ::testing::TempDir() + "/edit_b.gguf";
  write_bytes(p1, original);
  write_bytes(p2, edited);
  auto m1 = Model::load(p1), m2 = Model::load(p2);
  EXPECT_NE(m1->fingerprint(), m2->fingerprint());
  SessionOptions o;
  o.threads = 1;
  o.n_ctx = 32;
  Session a(m1, o), b(m2, o);
  const std::vector<std::int32_t> prompt = {1, 2, 3, 4, 5};
  a.prefill(prompt);
  b.prefill(prompt);
  EXPECT_NE(logits_of(a), logits_of(b)) << "the edit does not matter: the test proves nothing";
  const std::string path = ::testing::TempDir() + "/edit.lsess";
  a.save_state(path);
  Session c(m2, o);
  expect_refused(c, path, Status::invalid_argument, "was saved from another model");
  // Any one byte of the file, in every tensor and between them, changes it.
  const std::uint64_t fp = m1->fingerprint();
  std::vector<std::size_t> spots;
  for (const GgufTensor& t : f.tensors()) {
    const std::size_t at = static_cast<std::size_t>(t.data - original.data());
    for (std::size_t k : {std::size_t{0}, t.n_bytes / 3, t.n_bytes - 1}) spots.push_back(at + k);
  }
  for (std::size_t at = 0; at < original.size(); at += original.size() / 97) spots.push_back(at);
  spots.push_back(original.size() - 1);
  int hashed = 0;
  for (std::size_t at : spots) {
    std::vector<std::uint8_t> d = original;
    d[at] ^= 0x01;
    std::shared_ptr<const Model> m;
    try {
      m = Model::from_file(GgufFile::from_bytes(std::move(d)));
    } catch (const Error&) {
      continue;  // a byte of the header or a count: not a model
    }
    EXPECT_NE(m->fingerprint(), fp) << "byte " << at;
    ++hashed;
  }
  EXPECT_GT(hashed, 100);
}

// The fingerprint is hashed on several threads in fixed chunks: one value
// whatever the thread count, computed once however many threads ask at
// once, and the same for a file read into memory whose matrices were
// re-laid out (x16, where this CPU has such kernels) as for the mapping. A
// file of several chunks, with Q4_K matrices across chunk boundaries.
TEST(SessionStateFile, TheFingerprintIsOneValueForOneFile) {
  RandomModelSpec spec;
  spec.d_model = 256;
  spec.ff = 512;
  spec.kv_lora_rank = 64;
  spec.n_vocab = 16000;  // two 2.3 MB matrices: embeddings, output
  spec.weight_type = GgmlType::Q4_K;
  const std::string path = ::testing::TempDir() + "/fp_chunks.gguf";
  write_random_model(spec, path);
  ASSERT_GT(std::filesystem::file_size(path), 3 * kFingerprintChunkBytes);
  const std::uint64_t one = Model::load(path)->fingerprint(1);
  for (int threads : {2, 3, 8}) EXPECT_EQ(Model::load(path)->fingerprint(threads), one) << threads;
  LoadOptions read;
  read.file = GgufLoad::read;
  auto relaid = Model::load(path, read);
  if (kernels::matvec_kernels(active_isa()).x16_fast(GgmlType::Q4_K)) {
    EXPECT_GT(relaid->interleaved_weight_bytes(), 2 * kFingerprintChunkBytes);
  }
  EXPECT_EQ(relaid->fingerprint(3), one);
  // Many threads asking first, at once: one value.
  auto shared = Model::load(path);
  std::vector<std::uint64_t> got(6);
  std::vector<std::thread> askers;
  for (std::size_t i = 0; i < got.size(); ++i)
    askers.emplace_back([&, i] { got[i] = shared->fingerprint(static_cast<int>(i) + 1); });
  for (std::thread& t : askers) t.join();
  for (std::uint64_t v : got) EXPECT_EQ(v, one);
}

// README: the file is written 0600 (it holds a conversation), over an older
// file of any mode, whatever the umask; a model file written through the
// same temporary-and-rename takes the umask's mode as a plain file does.
// (Modes and the umask are POSIX's; elsewhere the save over an older file.)
TEST(SessionStateFile, SavedPrivately) {
  auto model = Model::load(kTestdata + "/tiny-dense.gguf");
  SessionOptions o;
  o.n_ctx = 16;
  Session a(model, o);
  a.prefill(std::vector<std::int32_t>{1, 2, 3});
  const std::string path = ::testing::TempDir() + "/private.lsess";
  std::ofstream(path) << "an older file";
#if LATTE_TEST_POSIX
  ::chmod(path.c_str(), 0644);
  const mode_t old_mask = ::umask(022);
  a.save_state(path);
  const std::string model_path = ::testing::TempDir() + "/umask_model.gguf";
  write_random_model(RandomModelSpec{}, model_path);
  ::umask(old_mask);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << std::oct << (st.st_mode & 0777);
  ASSERT_EQ(::stat(model_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u) << std::oct << (st.st_mode & 0777);
#else
  a.save_state(path);
#endif
  Session b(model, o);
  b.load_state(path);
  EXPECT_EQ(b.n_past(), 3);
}

// Two saves to one path at once (two threads, or two `latte run --session`
// processes) each write their own temporary: the file is always one whole
// session, never a mix, and no save fails or leaves a temporary behind.
TEST(SessionStateFile, ConcurrentSavesToOnePathLeaveOneWholeFile) {
  auto model = Model::load(kTestdata + "/tiny-dense.gguf");
  const auto tokens = testdata_tokens();
  SessionOptions o;
  o.threads = 1;
  o.n_ctx = 200;
  Session a(model, o), b(model, o), r(model, o);
  a.prefill(std::span(tokens).first(5));
  b.prefill(std::span(tokens).first(150));
  const std::string dir = ::testing::TempDir() + "/concurrent_saves";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/one.lsess";
  for (int round = 0; round < 40; ++round) {
    std::string err_a, err_b;
    // Both saves begin together. Not std::latch: libstdc++ 12's atomic wait
    // without a futex (mingw-w64, under wine) can miss the wake-up and hang
    // (GCC PR 106183, fixed in 13); a yielding spin cannot.
    std::atomic<int> arrived{0};
    auto start = [&] {
      arrived.fetch_add(1);
      while (arrived.load() < 2) std::this_thread::yield();
    };
    std::thread ta([&] {
      start();
      try {
        a.save_state(path);
      } catch (const Error& e) {
        err_a = e.what();
      }
    });
    std::thread tb([&] {
      start();
      try {
        b.save_state(path);
      } catch (const Error& e) {
        err_b = e.what();
      }
    });
    ta.join();
    tb.join();
    EXPECT_EQ(err_a, "");
    EXPECT_EQ(err_b, "");
    r.load_state(path);
    EXPECT_TRUE(r.n_past() == 5 || r.n_past() == 150) << r.n_past();
    EXPECT_EQ(files_in(dir, "one.lsess."), 0) << "a temporary left behind";
  }
}

// A save that cannot land names why (it said "Success": the error code was
// reused before its message was read), and leaves no temporary.
TEST(SessionStateFile, AFailedSaveSaysWhy) {
  auto model = Model::load(kTestdata + "/tiny-dense.gguf");
  SessionOptions o;
  o.n_ctx = 16;
  Session a(model, o);
  a.prefill(std::vector<std::int32_t>{1, 2, 3});
  const std::string dir = ::testing::TempDir() + "/failed_save";
  std::filesystem::create_directories(dir + "/target");
  try {
    a.save_state(dir + "/target");  // a directory: refused before anything is written
    ADD_FAILURE() << "saved over a directory";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::io_error);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("is a directory, not a regular file"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("Success"), std::string::npos) << msg;
  }
  EXPECT_EQ(files_in(dir, "target."), 0) << "a temporary left behind";
  try {
    a.save_state(dir + "/no_such_dir/x.lsess");
    ADD_FAILURE() << "saved into a missing directory";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::io_error);
    // The system's own words for the reason.
#if LATTE_TEST_POSIX
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos) << e.what();
#else
    EXPECT_NE(std::string(e.what()).find("not found"), std::string::npos) << e.what();
#endif
  }
}

}  // namespace
}  // namespace latte
