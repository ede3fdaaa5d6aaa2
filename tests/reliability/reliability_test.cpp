// Tests of issue 41's hostile-input defects, one or more per defect: NaN
// weights under every cache type, files refused for inconsistent metadata,
// outputs that must not replace special files, input without end, and
// `latte eval` under address-space limits.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "latte/latte.h"
#include "platform/atomic_file.h"
#include "runtime/error.h"
#include "runtime/gguf/gguf_file.h"
#include "runtime/model/model.h"
#include "tools/random_model.h"
#include "runtime/session/session.h"
#include "tests/common/fifo_util.h"
#include "tests/common/testdata.h"

namespace latte {
namespace {

namespace fs = std::filesystem;

std::vector<std::uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The bytes of `file` with element `index` of tensor `name` (F32) set to v.
std::vector<std::uint8_t> with_weight(std::vector<std::uint8_t> bytes, const std::string& name, std::size_t index,
                                      float v) {
  const GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size());
  const GgufTensor* t = f.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  if (!t) return bytes;
  EXPECT_EQ(t->type, GgmlType::F32) << name;
  const std::size_t at = static_cast<std::size_t>(t->data - bytes.data()) + index * sizeof(float);
  std::memcpy(bytes.data() + at, &v, sizeof v);
  return bytes;
}

// Runs a shell command line; returns its exit status as the shell reports
// it (128 + N for a signal) and its output (stdout and stderr).
int run_shell(const std::string& cmd, std::string* out = nullptr) {
  const std::string full = "{ " + cmd + " ; } 2>&1";
  std::FILE* p = ::popen(full.c_str(), "r");
  if (!p) return -1;
  std::string text;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  const int st = ::pclose(p);
  if (out) *out = text;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::string temp_dir(const char* tag) {
  std::string d = (fs::temp_directory_path() / (std::string("latte-rel-") + tag + "-XXXXXX")).string();
  if (!::mkdtemp(d.data())) ADD_FAILURE() << "mkdtemp";
  return d;
}

// --- 1. A non-finite query, latent query or attention output is refused
// with every cache type: the int8 kernels quantize queries and clamp
// exponentials, and took NaN, inf and float32's largest values in the
// query weights for finite (wrong) logits.
TEST(Reliability, NonFiniteQueryWeightsAreRefusedWithEveryCache) {
  const std::vector<std::uint8_t> clean = read_bytes(test::kTestdata + "/tiny-dense.gguf");
  ASSERT_FALSE(clean.empty());
  const std::vector<std::int32_t> tokens = {510, 84, 104, 101};
  for (const char* tensor : {"blk.0.attn_q_a.weight", "blk.0.attn_q_b.weight", "blk.0.attn_k_b.weight"}) {
    for (const float v : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), 3e38f}) {
      auto model = Model::from_file(GgufFile::from_bytes(with_weight(clean, tensor, 0, v)));
      for (LatentStorage cache : {LatentStorage::f32, LatentStorage::f16, LatentStorage::int8}) {
        for (MlaForm form : {MlaForm::naive, MlaForm::absorbed}) {
          SCOPED_TRACE(std::string(tensor) + " = " + std::to_string(v) + ", " + latent_storage_name(cache) +
                       (form == MlaForm::naive ? ", naive" : ", absorbed"));
          SessionOptions o;
          o.threads = 1;
          o.n_ctx = 16;
          o.cache = cache;
          o.prefill_form = form;
          Session s(model, o);
          std::vector<float> all;
          try {
            s.prefill(tokens, &all);
            ADD_FAILURE() << "accepted";
          } catch (const Error& e) {
            EXPECT_EQ(e.status(), Status::bad_file) << e.what();
            EXPECT_NE(std::string(e.what()).find("overflow float32"), std::string::npos) << e.what();
          }
          EXPECT_EQ(s.n_past(), 0);
          // Decode, one token at a time (the absorbed decode kernels).
          Session d(model, o);
          bool refused = false;
          for (std::int32_t t : tokens) {
            try {
              d.decode(t);
            } catch (const Error& e) {
              EXPECT_EQ(e.status(), Status::bad_file) << e.what();
              refused = true;
              break;
            }
          }
          EXPECT_TRUE(refused) << "decode accepted";
        }
      }
    }
  }
}

// --- 6. Metadata that loaded and then could not run, or was reported as
// something other than what runs.
std::vector<std::uint8_t> with_u32(std::vector<std::uint8_t> bytes, const std::string& key, std::uint32_t v) {
  const GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size());
  const GgufKv* kv = f.find(key);
  EXPECT_NE(kv, nullptr) << key;
  if (!kv) return bytes;
  EXPECT_EQ(kv->value.bytes, sizeof v) << key;
  std::memcpy(bytes.data() + (kv->value.data - bytes.data()), &v, sizeof v);
  return bytes;
}

std::string load_refusal(std::vector<std::uint8_t> bytes, Status want = Status::bad_file) {
  try {
    (void)Model::from_file(GgufFile::from_bytes(std::move(bytes)));
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), want) << e.what();
    return e.what();
  }
  return "accepted";
}

TEST(Reliability, ZeroLayersAreRefusedNamingTheKey) {
  const std::string why = load_refusal(with_u32(random_model_bytes(RandomModelSpec{}), "deepseek2.block_count", 0));
  EXPECT_NE(why.find("deepseek2.block_count"), std::string::npos) << why;
  // llama.cpp's file too, through the C API.
  const std::string dir = temp_dir("layers");
  const std::string path = dir + "/zero-layers.gguf";
  {
    const auto b = with_u32(read_bytes(test::kTestdata + "/tiny-dense.gguf"), "deepseek2.block_count", 0);
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }
  latte_model* m = nullptr;
  EXPECT_EQ(latte_model_load(path.c_str(), &m), LATTE_ERR_BAD_FILE);
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(latte_last_error()).find("block_count"), std::string::npos) << latte_last_error();
  std::string out;
  EXPECT_EQ(run_shell(std::string(LATTE_CLI) + " info " + path, &out), 1) << out;
  EXPECT_NE(out.find("deepseek2.block_count"), std::string::npos) << out;
  fs::remove_all(dir);
}

TEST(Reliability, ArchitectureWithANulIsRefusedNamingTheKey) {
  std::vector<std::uint8_t> b = random_model_bytes(RandomModelSpec{});
  const GgufFile f = GgufFile::from_memory(b.data(), b.size());
  const GgufKv* kv = f.find("general.architecture");
  ASSERT_NE(kv, nullptr);
  const std::string_view arch = f.require_string("general.architecture");
  ASSERT_EQ(arch, "deepseek2");
  b[static_cast<std::size_t>(arch.data() - reinterpret_cast<const char*>(b.data())) + 4] = '\0';  // "deep\0eek2"
  const std::string why = load_refusal(std::move(b));
  EXPECT_NE(why.find("general.architecture"), std::string::npos) << why;
  EXPECT_NE(why.find("NUL"), std::string::npos) << why;
}

TEST(Reliability, QLoraRankWithAPlainQueryIsRefused) {
  RandomModelSpec spec;  // q_lora_rank 0: attn_q
  spec.n_experts = 4, spec.n_experts_used = 2, spec.ff_expert = 32, spec.n_leading_dense = 1;
  const std::string why = load_refusal(with_u32(random_model_bytes(spec), "deepseek2.attention.q_lora_rank", 64));
  EXPECT_NE(why.find("q_lora_rank is 64"), std::string::npos) << why;
  EXPECT_NE(why.find("attn_q"), std::string::npos) << why;
}

// A damaged count in a session file: the checksum is judged first, as
// latte.h says, so it is "corrupt", not "truncated".
TEST(Reliability, DamagedSessionCountIsCorruptNotTruncated) {
  auto model = Model::from_file(GgufFile::from_bytes(random_model_bytes(RandomModelSpec{})));
  SessionOptions o;
  o.threads = 1;
  o.n_ctx = 64;
  Session s(model, o);
  s.prefill(std::vector<std::int32_t>{1, 2, 3, 4, 5});
  const std::string dir = temp_dir("count");
  const std::string path = dir + "/s.lsess";
  s.save_state(path);
  std::vector<std::uint8_t> b = read_bytes(path);
  for (std::int64_t n : {std::int64_t{6}, std::int64_t{4}, std::int64_t{1} << 40}) {
    std::vector<std::uint8_t> d = b;
    std::memcpy(d.data() + 56, &n, sizeof n);  // n_past
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(d.data()), static_cast<std::streamsize>(d.size()));
    Session t(model, o);
    try {
      t.load_state(path);
      ADD_FAILURE() << "loaded with n_past " << n;
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::bad_file) << e.what();
      EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find("(truncated)"), std::string::npos) << e.what();  // not the size first
    }
    EXPECT_EQ(t.n_past(), 0);
  }
  // A file cut short is still refused as bad_file.
  std::vector<std::uint8_t> cut(b.begin(), b.end() - 100);
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(cut.data()), static_cast<std::streamsize>(cut.size()));
  Session t(model, o);
  EXPECT_THROW(t.load_state(path), Error);
  fs::remove_all(dir);
}

// --- 2. Outputs are written through a temporary renamed over the path:
// never over a device, a FIFO or a directory, and through a symbolic link
// to its target.
TEST(Reliability, MakeModelLeavesAFifoAsItWas) {
  const std::string dir = temp_dir("fifo");
  const std::string fifo = dir + "/out.gguf";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string out;
  const int rc = run_shell(std::string(LATTE_CLI) + " make-model --preset tiny --layers 1 -o " + fifo, &out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("a FIFO, not a regular file"), std::string::npos) << out;
  struct stat st {};
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1) << "a temporary was left";
  fs::remove_all(dir);
}

TEST(Reliability, MakeModelLeavesADeviceNodeAsItWas) {
  const std::string dir = temp_dir("dev");
  const std::string dev = dir + "/null";
  // A node of its own (the system's /dev/null is not put at risk): root only.
  if (::mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
    fs::remove_all(dir);
    GTEST_SKIP() << "mknod needs root: " << std::strerror(errno);
  }
  std::string out;
  const int rc = run_shell(std::string(LATTE_CLI) + " make-model --preset tiny --layers 1 -o " + dev, &out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("a character device, not a regular file"), std::string::npos) << out;
  struct stat st {};
  ASSERT_EQ(::lstat(dev.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(st.st_rdev, makedev(1, 3));
  fs::remove_all(dir);
}

TEST(Reliability, AtomicFileReplacesOnlyRegularFiles) {
  const std::string dir = temp_dir("atomic");
  auto write = [](const std::string& path, const char* text) {
    AtomicFile f(path, "test", false);
    f.write(text, std::strlen(text));
    f.commit(false);
  };
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  // A regular file, and a new one.
  write(dir + "/a", "one");
  write(dir + "/a", "two");
  EXPECT_EQ(read(dir + "/a"), "two");
  // A symbolic link: followed, its target replaced, the link kept.
  fs::create_symlink(dir + "/a", dir + "/link");
  write(dir + "/link", "three");
  EXPECT_TRUE(fs::is_symlink(dir + "/link"));
  EXPECT_EQ(read(dir + "/a"), "three");
  // A dangling link, a link to a FIFO, a FIFO, a directory: refused, left as they were.
  fs::create_symlink(dir + "/none", dir + "/dangling");
  ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0600), 0);
  fs::create_symlink(dir + "/fifo", dir + "/to-fifo");
  fs::create_directory(dir + "/d");
  for (const char* name : {"dangling", "to-fifo", "fifo", "d"}) {
    try {
      write(dir + "/" + name, "x");
      ADD_FAILURE() << name << " replaced";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::io_error);
      EXPECT_NE(std::string(e.what()).find("refusing to replace it"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(fs::is_symlink(dir + "/dangling"));
  EXPECT_FALSE(fs::exists(dir + "/none"));
  EXPECT_TRUE(fs::is_fifo(dir + "/fifo"));
  EXPECT_TRUE(fs::is_directory(dir + "/d"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 6) << "a temporary was left";
  fs::remove_all(dir);
}

TEST(Reliability, SessionSaveRefusesAFifo) {
  const auto bytes = random_model_bytes(RandomModelSpec{});
  const std::string dir = temp_dir("save");
  const std::string model_path = dir + "/m.gguf";
  std::ofstream(model_path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  latte_model* m = nullptr;
  ASSERT_EQ(latte_model_load(model_path.c_str(), &m), LATTE_OK);
  latte_session* s = nullptr;
  ASSERT_EQ(latte_session_create(m, nullptr, &s), LATTE_OK);
  const int32_t tok[] = {1, 2, 3};
  ASSERT_EQ(latte_session_prefill(s, tok, 3), LATTE_OK);
  const std::string fifo = dir + "/s.lsess";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(latte_session_save(s, fifo.c_str()), LATTE_ERR_IO);
  EXPECT_NE(std::string(latte_last_error()).find("a FIFO"), std::string::npos) << latte_last_error();
  EXPECT_TRUE(fs::is_fifo(fifo));
  latte_session_free(s);
  latte_model_free(m);
  fs::remove_all(dir);
}

// --- 3. Input without end: refused at a stated limit, not read into memory
// until the system runs out. Under a 1 GiB address-space limit (what
// `run -f /dev/zero` grew past before).
bool under_asan() {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return true;
#endif
#endif
  return false;
}

// Under qemu-user (the cross build's tests) the emulator reserves the guest's
// address space up front: no limit can be set there either.
bool under_emulator() { return std::string(LATTE_CLI).find("qemu") != std::string::npos; }

TEST(Reliability, PromptFileWithoutEndIsRefused) {
  const std::string limit = under_asan() || under_emulator() ? "" : "ulimit -v 1048576; ";
  std::string out;
  const int rc = run_shell(limit + std::string(LATTE_CLI) + " run --threads 1 -n 1 -f /dev/zero", &out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("more than 64 MiB"), std::string::npos) << out;
}

TEST(Reliability, InteractiveLineWithoutEndIsRefused) {
  const std::string limit = under_asan() || under_emulator() ? "" : "ulimit -v 1048576; ";
  std::string out;
  const int rc = run_shell(limit + std::string(LATTE_CLI) + " run --threads 1 -n 1 -i </dev/zero", &out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("longer than 64 MiB"), std::string::npos) << out;
}

// --- 4. `latte eval` under address-space limits from 60 to 200 MB ends with
// an error or its logits, never a signal (oneDNN's GEMM threw inside an
// OpenMP region, its kernel generator crashed, the unwinder could not load).
// ASan reserves terabytes of shadow memory: no limit can be set there.
TEST(Reliability, EvalUnderMemoryLimitsEndsWithoutASignal) {
  if (under_asan() || under_emulator()) GTEST_SKIP() << "address-space limits do not apply under ASan or qemu";
  const std::string model = std::string(LATTE_SOURCE_DIR) + "/models/latte-tiny-mla.gguf";
  std::string tokens;
  for (int i = 1; i <= 300; ++i) {
    if (i > 1) tokens += ',';
    tokens += std::to_string(i);
  }
  const std::string dir = temp_dir("ulimit");
  int ok = 0;
  for (int mb = 60; mb <= 200; mb += 10) {
    for (const char* threads : {"1", "4"}) {
      std::string out;
      const int rc = run_shell("ulimit -v " + std::to_string(mb * 1024) + "; " + LATTE_CLI + " eval -m " + model +
                                   " --threads " + threads + " --tokens " + tokens + " --logits-out " + dir + "/l.bin",
                               &out);
      EXPECT_TRUE(rc == 0 || rc == 1) << mb << " MB, " << threads << " threads: exit " << rc << "\n" << out;
      ok += rc == 0;
    }
  }
  EXPECT_GT(ok, 0) << "no limit was high enough to run";
  fs::remove_all(dir);
}

// Issue 55, 1: where the OS cannot start the threads asked for (the probe:
// --threads 32 under `ulimit -v 300000`), latte run says so and exits 1;
// libgomp used to print "Thread creation failed" and end the process from
// inside the call. Without --threads it runs on those that start. (The same
// through the C API, under a thread limit that holds in the ASan build too:
// Session.ThreadsTheOsRefusesAreAStatus.)
TEST(Reliability, ThreadsTheOsRefusesAreAnError) {
  if (under_asan() || under_emulator()) GTEST_SKIP() << "address-space limits do not apply under ASan or qemu";
  const std::string model = std::string(LATTE_SOURCE_DIR) + "/models/latte-tiny-mla.gguf";
  const std::string run = std::string(LATTE_CLI) + " run -m " + model + " -p 'Q: Why' -n 4 --seed 1";
  std::string out;
  int rc = run_shell("ulimit -v 300000; " + run + " --threads 64", &out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("cannot start thread"), std::string::npos) << out;
  EXPECT_NE(out.find("of 64"), std::string::npos) << out;
  EXPECT_EQ(out.find("libgomp"), std::string::npos) << out;
  rc = run_shell("ulimit -v 300000; OMP_NUM_THREADS=200 " + run, &out);
  EXPECT_EQ(rc, 0) << out;
}

}  // namespace
}  // namespace latte
