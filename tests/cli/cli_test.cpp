// The `latte` binary end to end: eval's logits file against llama.cpp's, and
// clear errors (exit status 2 for a wrong command line, 1 for what goes wrong
// running it; a message naming the problem) for bad input.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "latte/latte.h"
#include "kernels/isa.h"
#include "runtime/model/model.h"
#include "tools/random_model.h"
#include "runtime/session/session.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/cli/cli_run.h"

namespace {

const std::string kTestdata = LATTE_TESTDATA_DIR;

using latte::test::Result;
using latte::test::run;
using latte::test::run_command;
using latte::test::run_shell;

// The number after "key": in bench's JSON text, or -1 where the key is absent.
double number_in(const std::string& text, const std::string& key) {
  const auto at = text.find("\"" + key + "\": ");
  return at == std::string::npos ? -1.0 : std::stod(text.substr(at + key.size() + 4));
}

std::string tokens_csv() {
  std::ifstream in(kTestdata + "/tokens.txt");
  std::string s;
  std::getline(in, s);
  return s;
}

TEST(Cli, EvalMatchesLlamaCppLogits) {
  // The file mapped (--mmap), read into memory (--no-mmap), and as the
  // default loads it (read, a file this small): all match, each said.
  for (const char* load : {" --mmap", " --no-mmap", ""}) {
    // A file of its own per run, none there before it: the next run must
    // not pass on the last one's output.
    const std::string out = ::testing::TempDir() + "/eval" + (*load ? load + 3 : "default") + ".f32";
    std::filesystem::remove(out);
    const Result r = run("eval -m " + kTestdata + "/tiny-moe-v2-lite.gguf --tokens " + tokens_csv() +
                         " --logits-out " + out + " --cache-type f32 --threads 2" + load);
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find(std::string(", ") + (std::string(load) == " --mmap" ? "mapped" : "read into memory") + ", in "),
              std::string::npos)
        << load << ": " << r.output;
    // Exactly [160, 512] floats, and llama.cpp's file as long.
    ASSERT_TRUE(std::filesystem::exists(out)) << load << ": no logits file\n" << r.output;
    ASSERT_EQ(std::filesystem::file_size(out), 160u * 512 * 4) << load;
    ASSERT_EQ(std::filesystem::file_size(kTestdata + "/tiny-moe-v2-lite.logits.f32"), 160u * 512 * 4);
    std::vector<float> got(160 * 512), want(160 * 512);
    std::ifstream(out, std::ios::binary).read(reinterpret_cast<char*>(got.data()), got.size() * 4);
    std::ifstream(kTestdata + "/tiny-moe-v2-lite.logits.f32", std::ios::binary)
        .read(reinterpret_cast<char*>(want.data()), want.size() * 4);
    double mx = 0;
    for (std::size_t i = 0; i < got.size(); ++i) mx = std::max(mx, std::fabs(double(got[i]) - want[i]));
    EXPECT_LT(mx, 1e-4) << load;
  }
}

TEST(Cli, InfoDescribesAFile) {
  const Result r = run("info " + kTestdata + "/tiny-dense.gguf");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("deepseek2"), std::string::npos);
  EXPECT_NE(r.output.find("kv_lora (d_c) 64"), std::string::npos);
  EXPECT_NE(r.output.find("q_lora 96"), std::string::npos);
  EXPECT_NE(r.output.find("F32 x"), std::string::npos);
  EXPECT_NE(r.output.find("int8"), std::string::npos);
  EXPECT_NE(r.output.find("tokenizer:     byte-level BPE, pre-tokenizer deepseek-llm, 512 tokens, BOS 510, EOS 511, "
                          "chat format deepseek2"),
            std::string::npos)
      << r.output;
  // The kernels that run and why: this CPU's best, or LATTE_ISA's cap.
  const std::string best = latte::isa_name(latte::supported_isas().back());
  EXPECT_NE(r.output.find("kernels:       " + best + " (the best this CPU runs"), std::string::npos) << r.output;
  const Result capped = run_shell("LATTE_ISA=ref " + std::string(LATTE_CLI) + " info " + kTestdata + "/tiny-dense.gguf");
  EXPECT_NE(capped.output.find("kernels:       ref (LATTE_ISA=ref caps the choice)"), std::string::npos)
      << capped.output;
  // A cap this CPU does not reach (LATTE_ISA=neon on a Cortex-A72, or on
  // x86-64): the CPU decided, not the cap.
  for (const latte::Isa cap : {latte::Isa::avx2, latte::Isa::avx512, latte::Isa::asimd, latte::Isa::neon}) {
    if (latte::isa_supported(cap)) continue;
    const std::string name = latte::isa_name(cap);
    const Result above = run_shell("LATTE_ISA=" + name + " " + std::string(LATTE_CLI) + " info " + kTestdata +
                                   "/tiny-dense.gguf");
    EXPECT_NE(above.output.find(std::string("kernels:       ") + latte::isa_name(latte::best_isa_up_to(cap)) +
                                " (the best this CPU runs under LATTE_ISA=" + name),
              std::string::npos)
        << above.output;
    EXPECT_EQ(above.output.find("caps the choice"), std::string::npos) << above.output;
  }
}

// The cache at the model's context in a unit that keeps its digits: 2 layers
// x 32 tiles of 128 tokens x 80 elements (int4: 8 tiles of 512 tokens), plus
// tile tables (8 bytes a tile) and the cache's own objects (336 bytes). In GB
// all of them read 0.00x.
TEST(Cli, InfoCacheAtContextKeepsItsDigits) {
  const Result r = run("info " + kTestdata + "/tiny-dense.gguf", /*stdout_only=*/true);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("  f32      640.1 bytes per token (all layers),     2.622 MB at 4096 tokens"), std::string::npos)
      << r.output;  // 2621952 + objects
  EXPECT_NE(r.output.find("  f16      320.1 bytes per token (all layers),     1.312 MB at 4096 tokens"), std::string::npos)
      << r.output;  // 1311232 + objects
  EXPECT_NE(r.output.find("  int8     176.1 bytes per token (all layers),   721.744 kB at 4096 tokens"), std::string::npos)
      << r.output;  // 128 x (80 + 8 scale bytes) a tile: 721408 + objects
  EXPECT_NE(r.output.find("  int4     108.4 bytes per token (all layers),   682.448 kB at 4096 tokens"), std::string::npos)
      << r.output;  // 512 x (64 / 2 + 16 + 4 rope scale bytes) + 64 x 2 channel scale bytes a tile, 8 tiles a
                    // layer: 428160 with tile tables; an int8 filling tile of 512 x 88 a layer: 90112; a 512-row
                    // tile of f32 rows (quantizing scratch): 163840; + objects (LatentCache::bytes_for: 682448)
}

// A model whose d_R is not a multiple of 4 loads and runs with the f32 and
// f16 caches but cannot take the int8 one: info says so on that line and
// still reports the rest (it used to stop there with exit 1).
TEST(Cli, InfoOnAShapeInt8CannotCache) {
  latte::RandomModelSpec spec;  // 2 layers, d_c 32
  spec.d_rope = 6;
  const std::string path = ::testing::TempDir() + "/rope6.gguf";
  latte::write_random_model(spec, path);
  const Result r = run("info " + path, /*stdout_only=*/true);
  ASSERT_EQ(r.code, 0) << r.output;
  // 2 layers x (32 + 6) elements x 4 bytes, plus the tile tables per token.
  EXPECT_NE(r.output.find("  f32      304.1 bytes per token (all layers)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  f16      152.1 bytes per token (all layers)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  int8  not available: int8 latent storage needs d_c and d_R to be multiples of 4"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("tokenizer:     byte-level BPE"), std::string::npos) << r.output;
}

// make-model writes a file Latte loads and runs: here the tiny preset in
// Q6_K (its rows of 256 and 512 take Q6_K, the 64-wide ones llama.cpp's
// fallback Q8_0), evaluated over 20 tokens (one prefill chunk, which takes
// the packed int8 GEMM where the ISA packs Q6_K from 20 tokens or fewer).
TEST(Cli, MakeModelWritesAModelLatteRuns) {
  const std::string dir = ::testing::TempDir(), out = dir + "/made-q6k.gguf";
  Result r = run("make-model --preset tiny --type Q6_K --layers 2 --vocab 300 --seed 3 -o " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  r = run("info " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("layers:        2   d_model 256   vocab 300"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Q6_K x14"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Q8_0 x6"), std::string::npos) << r.output;
  r = run("eval -m " + out + " --tokens 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20 --logits-out " + out + ".f32");
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream in(out + ".f32", std::ios::binary);
  std::vector<float> logits(20 * 300 + 1);
  in.read(reinterpret_cast<char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
  ASSERT_EQ(in.gcount(), static_cast<std::streamsize>(20 * 300 * sizeof(float)));
  logits.pop_back();
  float spread = 0;
  for (float v : logits) {
    ASSERT_TRUE(std::isfinite(v));
    spread = std::max(spread, std::fabs(v - logits[0]));
  }
  EXPECT_GT(spread, 1e-3f);  // not a constant
  r = run("make-model --preset v2 -o " + dir + "/never.gguf");
  EXPECT_NE(r.code, 0);
  for (const char* preset : {"v2-lite-moe", "minicpm3-4b", "plm-1.8b", "tiny"})  // the presets it takes
    EXPECT_NE(r.output.find(preset), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir + "/never.gguf"));
}

TEST(Cli, InfoModelsMeetsTheMemoryBudget) {
  const Result r = run("info --models");
  ASSERT_EQ(r.code, 0) << r.output;
  // DeepSeek-V2-Lite at 163,840 tokens: int4 <= 1.4 GiB (1.451 GB: 1.352
  // GiB; 326 bytes per token and layer, with an f16 scale per latent channel
  // and 512-token tile, plus each layer's int8 filling tile of 512 tokens and
  // a 512-row f32 scratch tile), int8 <= 2.6 GB, f16 <= 5.1 GB.
  EXPECT_NE(r.output.find("DeepSeek-V2-Lite   163840 tokens: int4 1.451 GB, int8 2.584 GB, f16 5.096 GB"),
            std::string::npos)
      << r.output;
  // The budget itself, on the bytes the table prints (27 layers, d_c 512, d_R 64).
  int64_t int4_bytes = 0;
  ASSERT_EQ(latte_cache_bytes(27, 512, 64, LATTE_CACHE_INT4, 163840, &int4_bytes), LATTE_OK);
  EXPECT_LE(static_cast<double>(int4_bytes), 1.4 * (1 << 30));
}

TEST(Cli, BadInputGivesClearErrors) {
  const std::string dir = ::testing::TempDir();
  Result r = run("info /nonexistent/x.gguf");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("/nonexistent/x.gguf"), std::string::npos) << r.output;

  // Truncated file.
  {
    std::ifstream in(kTestdata + "/tiny-dense.gguf", std::ios::binary);
    std::vector<char> head(100000);
    in.read(head.data(), head.size());
    std::ofstream(dir + "/trunc.gguf", std::ios::binary).write(head.data(), head.size());
  }
  r = run("info " + dir + "/trunc.gguf");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("bad file"), std::string::npos) << r.output;

  // Unknown architecture.
  latte::RandomModelSpec spec;
  auto bytes = latte::random_model_bytes(spec);
  const std::string arch = "deepseek2";
  auto it = std::search(bytes.begin(), bytes.end(), arch.begin(), arch.end());
  ASSERT_NE(it, bytes.end());
  std::copy_n("llamazoo2", 9, it);  // general.architecture's value, same length
  std::ofstream(dir + "/arch.gguf", std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  r = run("info " + dir + "/arch.gguf");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("unknown architecture 'llamazoo2'"), std::string::npos) << r.output;

  r = run("eval -m " + kTestdata + "/tiny-dense.gguf --tokens 1,x,3 --logits-out " + dir + "/o.f32");
  EXPECT_EQ(r.code, 2);  // the command line itself is wrong
  EXPECT_NE(r.output.find("'x'"), std::string::npos) << r.output;
  r = run("eval -m " + kTestdata + "/tiny-dense.gguf --tokens 1,99999 --logits-out " + dir + "/o.f32");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("99999"), std::string::npos) << r.output;
  r = run("bench -m " + kTestdata + "/tiny-dense.gguf --cache-type q4");
  EXPECT_NE(r.code, 0);
  r = run("run -m " + kTestdata + "/tiny-dense.gguf -p hello -c 1");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("does not fit the context of 1"), std::string::npos) << r.output;
}

TEST(Cli, ArgumentsAreCheckedBeforeTheyAreUsed) {
  const std::string dir = ::testing::TempDir(), m = kTestdata + "/tiny-dense.gguf";
  auto fails_with = [](const Result& r, const std::string& needle) {
    EXPECT_NE(r.code, 0) << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
  };
  fails_with(run("frobnicate"), "unknown command 'frobnicate'");
  // Lists: digits only, no empty items, ids inside the vocabulary (counted from 1).
  fails_with(run("eval -m " + m + " --tokens 1,2, --logits-out " + dir + "/o.f32"), "item 3, ''");
  fails_with(run("eval -m " + m + " --tokens +5 --logits-out " + dir + "/o.f32"), "item 1, '+5'");
  fails_with(run("eval -m " + m + " --tokens 5,600 --logits-out " + dir + "/o.f32"), "item 2, id 600");
  fails_with(run("bench -m " + m + " --depths 0,,4"), "--depths: item 2");
  fails_with(run("bench -m " + m + " -p 0 -n 0"), "nothing to measure");
  // Sampler and seed values the sampler would refuse are refused before loading.
  fails_with(run("run -m " + m + " -p hi --top-p 0"), "--top-p: 0 is outside (0, 1]");
  fails_with(run("run -m " + m + " -p hi --repeat-penalty 0"), "--repeat-penalty");
  // ... judged as the float they are stored in (1e-50 passed as a double,
  // then reached the sampler as 0).
  fails_with(run("run -m " + m + " -p hi --top-p 1e-50"), "--top-p: 1e-50 is outside (0, 1] (as a 32-bit float: 0");
  fails_with(run("run -m " + m + " -p hi --repeat-penalty 1e-50"), "--repeat-penalty: 1e-50 is outside (0, 100]");
  fails_with(run("run -m " + m + " -p hi --seed -1"), "--seed: '-1'");
  fails_with(run("run -m " + m + " -p hi --seed 18446744073709551616"), "--seed");
  fails_with(run("run -m " + m + " -p hi --threads abc"), "'abc' is not an integer");
  fails_with(run("run -m " + m + " -p hi --prompt-ids 1,2"), "excludes");
  fails_with(run("run -m \"\" -p hi"), "empty path");
  fails_with(run("info --models " + m), "not both");
  // Perplexity over a text too short to predict anything, or a directory.
  std::ofstream(dir + "/empty.txt").close();
  fails_with(run("perplexity -m " + std::string(LATTE_SOURCE_DIR) + "/models/latte-tiny-mla.gguf -f " + dir + "/empty.txt"),
             "nothing to predict");
  fails_with(run("perplexity -m " + m + " --windows " + dir), "is a directory");
  // A windows file with CRLF line ends reads like one with LF.
  std::ofstream(dir + "/crlf.txt") << "1,2,3\r\n4,5,6\r\n";
  const Result crlf = run("perplexity -m " + m + " --windows " + dir + "/crlf.txt --json");
  ASSERT_EQ(crlf.code, 0) << crlf.output;
  EXPECT_NE(crlf.output.find("\"predicted\": 4"), std::string::npos) << crlf.output;
}

TEST(Cli, BenchJsonEscapesThePath) {
  const std::string dir = ::testing::TempDir() + "/we\"ird\\dir";
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "' && cp " + kTestdata + "/tiny-dense.gguf '" + dir + "/m.gguf'").c_str()), 0);
  const Result r = run("bench -m '" + dir + "/m.gguf' -p 1 -n 1 --threads 1 --json");
  ASSERT_EQ(r.code, 0) << r.output;  // -p 1 -n 1: the context still holds the warm-up
  EXPECT_NE(r.output.find("\"model\": \"" + ::testing::TempDir() + "/we\\\"ird\\\\dir/m.gguf\","), std::string::npos)
      << r.output;
}

TEST(Cli, TinyTemperatureSamplesLikeGreedy) {
  const std::string m = std::string(LATTE_SOURCE_DIR) + "/models/latte-tiny-mla.gguf";
  const Result greedy = run("run -m " + m + " -p \"Once upon a time\" -n 10 --print-ids --temp 0", true);
  const Result tiny = run("run -m " + m + " -p \"Once upon a time\" -n 10 --print-ids --temp 1e-45", true);
  ASSERT_EQ(greedy.code, 0) << greedy.output;
  ASSERT_EQ(tiny.code, 0) << tiny.output;
  EXPECT_EQ(std::count(greedy.output.begin(), greedy.output.end(), ','), 9) << greedy.output;  // 10 ids
  EXPECT_EQ(tiny.output, greedy.output);
}

TEST(Cli, BadIsaNameIsRefused) {
  const Result r = run("info --models");  // sanity: runs
  ASSERT_EQ(r.code, 0);
  const Result bad = run_shell("LATTE_ISA=sse9 " + std::string(LATTE_CLI) + " info --models");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.output.find("LATTE_ISA='sse9'"), std::string::npos) << bad.output;
}

TEST(Cli, BenchReportsEveryDepth) {
  const Result r =
      run("bench -m " + kTestdata + "/tiny-dense.gguf --depths 64,0 -p 16 -n 4 --threads 1 --json --no-mmap");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("\"weights\": \"read\""), std::string::npos) << r.output;
  const auto d0 = r.output.find("\"depth\": 0,"), d64 = r.output.find("\"depth\": 64,");
  ASSERT_NE(d0, std::string::npos) << r.output;
  ASSERT_NE(d64, std::string::npos) << r.output;
  EXPECT_LT(d0, d64);  // ascending
  EXPECT_NE(r.output.find("\"decode_tok_s\""), std::string::npos);
  EXPECT_EQ(r.output.find("\"decode_tok_s\": 0.00"), std::string::npos) << r.output;
  // Decode's weight stream against the machine's read bandwidth, measured in the same run.
  auto number_after = [&](const std::string& key) { return number_in(r.output, key); };
  EXPECT_EQ(number_after("decode_weight_bytes"),
            static_cast<double>(latte::Model::load(kTestdata + "/tiny-dense.gguf")->decode_weight_bytes()));
  EXPECT_GT(number_after("read_GBps_before"), 0.1) << r.output;
  EXPECT_GT(number_after("read_GBps_after"), 0.1) << r.output;
  EXPECT_GT(number_after("decode_weights_GBps"), 0.0) << r.output;
  EXPECT_GT(number_after("decode_read_pct"), 0.0) << r.output;
  // Depth 0 decoded next to each deeper repetition: the depth-0 row is its
  // own reference; the depth-64 row has one of its own and the ratio to it.
  EXPECT_EQ(number_after("decode_pct_of_adjacent_depth0"), 100.0) << r.output;
  EXPECT_EQ(number_after("decode_depth0_adjacent_tok_s"), number_after("decode_tok_s")) << r.output;
  const std::string row64 = r.output.substr(d64, r.output.find('}', d64) - d64);
  const double adj = number_in(row64, "decode_depth0_adjacent_tok_s");
  EXPECT_GT(adj, 0.0) << r.output;
  EXPECT_NEAR(number_in(row64, "decode_pct_of_adjacent_depth0"), 100 * number_in(row64, "decode_tok_s") / adj, 0.1)
      << r.output;
  // Single steps alternated with depth-0 ones: medians for depth 64, none
  // for depth 0 (nothing to compare it with).
  const std::string row0 = r.output.substr(d0, r.output.find('}', d0) - d0);
  for (const std::string key : {"\"decode_step_ms\": null", "\"decode_depth0_step_ms\": null",
                                "\"decode_pct_of_interleaved_depth0\": null"})
    EXPECT_NE(row0.find(key), std::string::npos) << key << " in " << row0;
  const double step = number_in(row64, "decode_step_ms"), step0 = number_in(row64, "decode_depth0_step_ms");
  ASSERT_GT(step, 0.0) << row64;
  ASSERT_GT(step0, 0.0) << row64;
  // The ratio is of the unrounded medians; the milliseconds print to 0.001.
  const double pct = number_in(row64, "decode_pct_of_interleaved_depth0");
  EXPECT_NEAR(pct, 100 * step0 / step, pct * (0.0005 / step0 + 0.0005 / step) + 0.05) << row64;
}

// The interleaved steps: n_gen x repetitions of each, said in the text table.
TEST(Cli, BenchInterleavesAsManyStepsAsItDecodes) {
  const Result r = run("bench -m " + kTestdata + "/tiny-dense.gguf --depths 32 -p 0 -n 3 -r 2 --threads 1");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("medians of 6 single steps at the depth alternated with as many from depth 0"),
            std::string::npos)
      << r.output;
  const auto row = r.output.find("\n      32 |");
  ASSERT_NE(row, std::string::npos) << r.output;
  const std::string line = r.output.substr(row + 1, r.output.find('\n', row + 1) - row - 1);
  EXPECT_NE(line.find(" / "), std::string::npos) << line;
  EXPECT_NE(line.find("%)"), std::string::npos) << line;
}

// --versus-cache: a second cache type filled to each depth beside the first,
// its single steps among the alternated ones: a median at each depth > 0, in
// the JSON and in the text; the same type twice, or no decode, refused.
TEST(Cli, BenchAlternatesASecondCacheType) {
  const std::string m = kTestdata + "/tiny-dense.gguf";
  const Result r = run("bench -m " + m + " --depths 0,32 -p 0 -n 3 --threads 1 --cache-type int8 --versus-cache int4 --json",
                       /*stdout_only=*/true);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("\"versus_cache_type\": \"int4\""), std::string::npos) << r.output;
  const auto d0 = r.output.find("\"depth\": 0,"), d32 = r.output.find("\"depth\": 32,");
  ASSERT_NE(d0, std::string::npos) << r.output;
  ASSERT_NE(d32, std::string::npos) << r.output;
  const std::string row0 = r.output.substr(d0, r.output.find('}', d0) - d0);
  const std::string row32 = r.output.substr(d32, r.output.find('}', d32) - d32);
  EXPECT_NE(row0.find("\"decode_versus_step_ms\": null"), std::string::npos) << row0;
  const auto at = row32.find("\"decode_versus_step_ms\": ");
  ASSERT_NE(at, std::string::npos) << row32;
  EXPECT_GT(std::stod(row32.substr(at + 25)), 0.0) << row32;
  const Result text = run("bench -m " + m + " --depths 32 -p 0 -n 2 --threads 1 --versus-cache f16", /*stdout_only=*/true);
  ASSERT_EQ(text.code, 0) << text.output;
  EXPECT_NE(text.output.find("\n      32 | int8 "), std::string::npos) << text.output;
  EXPECT_NE(text.output.find(" ms | f16 "), std::string::npos) << text.output;
  const Result same = run("bench -m " + m + " --depths 32 -p 0 -n 2 --versus-cache int8");
  EXPECT_NE(same.code, 0);
  EXPECT_NE(same.output.find("--versus-cache int8 is the --cache-type itself"), std::string::npos) << same.output;
  const Result no_decode = run("bench -m " + m + " --depths 32 -p 4 -n 0 --versus-cache int4");
  EXPECT_NE(no_decode.code, 0);
  EXPECT_NE(no_decode.output.find("--versus-cache compares decode steps, and -n is 0"), std::string::npos)
      << no_decode.output;
}

// `--batch`: a row per N with the aggregate rate, and its memory bound from
// the plain read measured next to that repetition.
TEST(Cli, BenchBatchReportsEachNAgainstItsAdjacentRead) {
  const Result r = run("bench -m " + kTestdata + "/tiny-moe-v2-lite.gguf --batch 2,1 --depths 8 -n 3 -r 2 --threads 1 --json");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto n1 = r.output.find("\"n\": 1,"), n2 = r.output.find("\"n\": 2,");
  ASSERT_NE(n1, std::string::npos) << r.output;
  ASSERT_NE(n2, std::string::npos) << r.output;
  EXPECT_LT(n1, n2);  // ascending
  for (const auto at : {n1, n2}) {
    const std::string row = r.output.substr(at, r.output.find('}', at) - at);
    const double n = number_in(row, "n"), tps = number_in(row, "decode_tok_s"), read = number_in(row, "read_GBps");
    const double mb = number_in(row, "step_MB"), bound = number_in(row, "bound_tok_s");
    EXPECT_GT(tps, 0.0) << row;
    EXPECT_NEAR(number_in(row, "per_sequence_tok_s"), tps / n, 0.02) << row;
    EXPECT_GT(read, 0.1) << row;
    EXPECT_GT(mb, 0.0) << row;
    EXPECT_NEAR(bound, n * read * 1e3 / mb, bound * (0.06 / mb + 0.01) + 0.01) << row;  // MB printed to 0.1
    EXPECT_NEAR(number_in(row, "bound_pct"), 100 * tps / bound, 0.1 + 0.01 * 100 * tps / bound) << row;
  }
  EXPECT_EQ(run("bench -m " + kTestdata + "/tiny-moe-v2-lite.gguf --batch 1 --depths 8 -n 0").code, 2);
  EXPECT_EQ(run("bench -m " + kTestdata + "/tiny-moe-v2-lite.gguf --batch 0 --depths 8 -n 2").code, 2);
}

// The threads bench reports are those its sessions ran with: the default
// is one per CPU the process may use (one under `taskset -c 0`, whatever
// the machine has), and --threads N runs N whatever OpenMP's variables say.
TEST(Cli, BenchReportsTheThreadsItRan) {
  const std::string bench = std::string(LATTE_CLI) + " bench -m " + kTestdata + "/tiny-dense.gguf --depths 0 -p 2 -n 1";
  const Result json = run_command("taskset -c 0 " + bench + " --json 2>/dev/null");
  ASSERT_EQ(json.code, 0) << json.output;
  EXPECT_NE(json.output.find("\"threads\": 1,"), std::string::npos) << json.output;
  const Result text = run_command("OMP_THREAD_LIMIT=1 OMP_NUM_THREADS=1 " + bench + " --threads 3 2>/dev/null");
  ASSERT_EQ(text.code, 0) << text.output;
  EXPECT_NE(text.output.find(", threads 3, "), std::string::npos) << text.output;
}

// scripts/bench.sh passes extra options such as --prefill-chunk 256 on to
// every run: bench takes it (it was refused) and records it.
TEST(Cli, BenchTakesThePrefillChunk) {
  const Result r = run("bench -m " + kTestdata + "/tiny-dense.gguf --depths 0 -p 8 -n 1 --prefill-chunk 3 --threads 1 --json",
                       /*stdout_only=*/true);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("\"n_prompt\": 8,\n  \"n_gen\": 1,\n  \"prefill_chunk\": 3,"), std::string::npos) << r.output;
}

TEST(Cli, BenchLeavesWhatItDidNotMeasureBlank) {
  const std::string m = kTestdata + "/tiny-dense.gguf";
  const Result decode_only = run("bench -m " + m + " --depths 0,32 -p 0 -n 2 --threads 1 --json");
  ASSERT_EQ(decode_only.code, 0) << decode_only.output;
  EXPECT_NE(decode_only.output.find("\"prefill_tok_s\": null, \"decode_tok_s\": "), std::string::npos)
      << decode_only.output;
  EXPECT_EQ(decode_only.output.find("\"decode_tok_s\": null"), std::string::npos) << decode_only.output;
  const Result prefill_only = run("bench -m " + m + " --depths 0 -p 4 -n 0 --threads 1");
  ASSERT_EQ(prefill_only.code, 0) << prefill_only.output;
  const auto row = prefill_only.output.find("\n       0 | ");
  ASSERT_NE(row, std::string::npos) << prefill_only.output;
  const std::string line = prefill_only.output.substr(row + 1, prefill_only.output.find('\n', row + 1) - row - 1);
  // A prefill speed, then a dash for each decode column (the interleaved
  // steps' among them).
  EXPECT_EQ(std::count(line.begin(), line.end(), '-'), 4) << line;
  EXPECT_EQ(line.find(" 0.0 "), std::string::npos) << line;
  // Nor does it time plain reads, which only judge decode's weight stream.
  EXPECT_EQ(prefill_only.output.find("plain read"), std::string::npos) << prefill_only.output;
}

TEST(Cli, PerplexityOverTokenWindows) {
  const std::string w = ::testing::TempDir() + "/windows.txt";
  std::ofstream(w) << tokens_csv() << "\n";
  const Result f32 = run("perplexity -m " + kTestdata + "/tiny-dense.gguf --windows " + w + " --cache-type f32 --json");
  ASSERT_EQ(f32.code, 0) << f32.output;
  EXPECT_NE(f32.output.find("\"predicted\": 159"), std::string::npos) << f32.output;
  // The same windows token by token through the decode kernel: the same perplexity to 5 digits.
  const Result dec = run("perplexity -m " + kTestdata + "/tiny-dense.gguf --windows " + w + " --cache-type f32 --decode");
  ASSERT_EQ(dec.code, 0) << dec.output;
  const auto ppl = [](const std::string& s) {
    const auto at = s.find("perplexity");
    return std::stod(s.substr(s.find_first_of("0123456789", s.find(at == std::string::npos ? "" : "perplexity", at) + 10)));
  };
  EXPECT_NEAR(ppl(f32.output.substr(f32.output.find("\"perplexity\""))), ppl(dec.output.substr(dec.output.find("perplexity "))), 0.01);
}

// --llama-cpp: llama.cpp's perplexity method, recomputed here from the
// session's logits: whole 96-token chunks, each starting with BOS, the
// tokens after each chunk's first half scored (47 per chunk), and the
// "+/-" as llama.cpp computes it.
TEST(Cli, PerplexityTheLlamaCppWay) {
  const std::string m = std::string(LATTE_SOURCE_DIR) + "/models/latte-tiny-mla.gguf", dir = ::testing::TempDir();
  std::string text;
  {
    std::ifstream in(std::string(LATTE_SOURCE_DIR) + "/models/heldout.txt");
    text.resize(1000);  // 3 chunks of 96 and a remainder
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(in.gcount()));
  }
  std::ofstream(dir + "/ppl.txt") << text;
  auto model = latte::Model::load(m);
  const latte::Tokenizer& tok = *model->tokenizer();
  const auto ids = tok.encode(text, true, false);
  const std::size_t n_ctx = 96, n_chunks = ids.size() / n_ctx;
  ASSERT_GE(n_chunks, 3u);
  ASSERT_NE(ids.size() % n_ctx, 0u);  // a remainder, which must be dropped
  latte::SessionOptions so;
  so.cache = latte::LatentStorage::f32;
  so.n_ctx = static_cast<std::int64_t>(n_ctx);
  so.threads = 1;
  latte::Session s(model, so);
  const int V = model->params().n_vocab;
  double nll = 0, nll2 = 0;
  std::int64_t count = 0;
  for (std::size_t c = 0; c < n_chunks; ++c) {
    std::vector<std::int32_t> w(ids.begin() + static_cast<std::ptrdiff_t>(c * n_ctx),
                                ids.begin() + static_cast<std::ptrdiff_t>((c + 1) * n_ctx));
    w[0] = tok.bos_id();
    std::vector<float> logits;
    s.reset();
    s.prefill(w, &logits);
    for (std::size_t t = n_ctx / 2; t + 1 < n_ctx; ++t) {
      const float* lg = logits.data() + t * V;
      const double mx = *std::max_element(lg, lg + V);
      double z = 0;
      for (int i = 0; i < V; ++i) z += std::exp(double(lg[i]) - mx);
      const double e = mx + std::log(z) - lg[w[t + 1]];
      nll += e;
      nll2 += e * e;
      ++count;
    }
  }
  ASSERT_EQ(count, static_cast<std::int64_t>(n_chunks * 47));
  const double mean = nll / count, ppl = std::exp(mean);
  const double err = std::sqrt((nll2 / count - mean * mean) / (count - 1)) * ppl;
  const Result r = run("perplexity -m " + m + " -f " + dir + "/ppl.txt -c 96 --llama-cpp --threads 1 --json", true);
  ASSERT_EQ(r.code, 0) << r.output;
  const auto field = [&](const std::string& key) {
    const auto at = r.output.find("\"" + key + "\": ");
    EXPECT_NE(at, std::string::npos) << key << ": " << r.output;
    return at == std::string::npos ? -1.0 : std::stod(r.output.substr(at + key.size() + 4));
  };
  EXPECT_EQ(field("windows"), static_cast<double>(n_chunks)) << r.output;
  EXPECT_EQ(field("predicted"), static_cast<double>(count)) << r.output;
  EXPECT_NEAR(field("mean_nll"), mean, 1e-6) << r.output;
  EXPECT_NEAR(field("perplexity_error"), err, 1e-5 * err) << r.output;
  EXPECT_NE(r.output.find("\"method\": \"llama.cpp\""), std::string::npos) << r.output;
  // The default scores every next token of every window, the remainder's too.
  const Result all = run("perplexity -m " + m + " -f " + dir + "/ppl.txt -c 96 --threads 1 --json", true);
  ASSERT_EQ(all.code, 0) << all.output;
  EXPECT_NE(all.output.find("\"predicted\": " + std::to_string(ids.size() - (ids.size() + n_ctx - 1) / n_ctx)),
            std::string::npos)
      << all.output;
  // Refused: too short a text for two chunks, and token-id windows.
  const Result short_text = run("perplexity -m " + m + " -f " + dir + "/ppl.txt -c 512 --llama-cpp");
  EXPECT_EQ(short_text.code, 1) << short_text.output;
  EXPECT_NE(short_text.output.find("needs at least 2 x --ctx = 1024"), std::string::npos) << short_text.output;
  // -c 2: a chunk's second half is its last token, which predicts nothing.
  const Result two = run("perplexity -m " + m + " -f " + dir + "/ppl.txt -c 2 --llama-cpp --json");
  EXPECT_EQ(two.code, 2) << two.output;
  EXPECT_NE(two.output.find("-c 2 leaves none (it needs 3 or more)"), std::string::npos) << two.output;
  EXPECT_EQ(two.output.find("nan"), std::string::npos) << two.output;
  std::ofstream(dir + "/w.txt") << "1,2,3\n";
  const Result windows = run("perplexity -m " + m + " --windows " + dir + "/w.txt --llama-cpp");
  EXPECT_EQ(windows.code, 2) << windows.output;
  EXPECT_NE(windows.output.find("--llama-cpp applies to -f"), std::string::npos) << windows.output;
}

TEST(Cli, InteractiveChatReadsTurnsFromStdin) {
  const std::string in = ::testing::TempDir() + "/turns.txt";
  std::ofstream(in) << "Hello there\n\nWhat now?\n";
  const Result r = run("run -m " + std::string(LATTE_SOURCE_DIR) + "/models/latte-tiny-mla.gguf -i --chat -n 6 --seed 3 < " + in);
  ASSERT_EQ(r.code, 0) << r.output;
  // A "> " prompt before each line read (3 lines, then EOF), then the statistics.
  std::size_t prompts = 0;
  for (std::size_t at = r.output.find("> "); at != std::string::npos; at = r.output.find("> ", at + 2)) ++prompts;
  EXPECT_GE(prompts, 4u) << r.output;
  // The last prompt starts a line after the last reply (stdout and stderr
  // in one pipe), and the statistics one after the end of input.
  EXPECT_NE(r.output.find("\n> \nprompt: "), std::string::npos) << r.output;
}

TEST(Cli, ChatTurnsFollowTheModelsTemplate) {
  const std::string model = std::string(LATTE_SOURCE_DIR) + "/models/latte-tiny-mla.gguf";
  const std::string bos = "<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";
  const std::string eos = "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";
  const std::string in = ::testing::TempDir() + "/chat_turns.txt";
  std::ofstream(in) << "Hello there\nWhat now?\n";
  // The shipped model's template is DeepSeek-V2's. Replies cut short by -n:
  // the next turn first closes the reply with EOS.
  Result r = run("run -m " + model + " -i --chat --verbose-prompt --system \"Be terse.\" -n 3 --ignore-eos --seed 3 < " + in);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("chat format deepseek2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tokens: " + bos + "Be terse.\n\nUser: Hello there\n\nAssistant:]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tokens: " + eos + "User: What now?\n\nAssistant:]"), std::string::npos) << r.output;
  // A reply the model ends itself has its EOS in the context already. With
  // seed 8 the first reply ends so on this project's machines; whichever way
  // it ends, exactly one of the two forms follows.
  r = run("run -m " + model + " -i --chat --verbose-prompt -n 60 --seed 8 < " + in);
  ASSERT_EQ(r.code, 0) << r.output;
  const bool closed = r.output.find("tokens: User: What now?\n\nAssistant:]") != std::string::npos;
  const bool cut = r.output.find("tokens: " + eos + "User: What now?\n\nAssistant:]") != std::string::npos;
  EXPECT_NE(closed, cut) << r.output;
  // A format whose markers the vocabulary lacks is refused, naming the marker.
  r = run("run -m " + model + " --chat --chat-format chatml -p hi -n 1");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("chat: format chatml needs the special token <|im_start|>"), std::string::npos) << r.output;
  r = run("run -m " + model + " --system hi -p hi -n 1");
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("--system requires --chat"), std::string::npos) << r.output;
  r = run("run -m " + model + " --chat --chat-format llama3 -p hi -n 1");
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("llama3 not in {deepseek2,deepseek3,chatml}"), std::string::npos) << r.output;
}

TEST(Cli, RunReadsThePromptFromAFile) {
  const std::string model = std::string(LATTE_SOURCE_DIR) + "/models/latte-tiny-mla.gguf";
  const std::string file = ::testing::TempDir() + "/prompt.txt";
  std::ofstream(file) << "A fortune:\nthe sea\n";  // the last newline is the editor's, not the prompt's
  const Result from_file = run("run -m " + model + " -f " + file + " -n 12 --seed 5 --print-ids", true);
  const Result from_arg = run("run -m " + model + " -p \"$(printf 'A fortune:\\nthe sea')\" -n 12 --seed 5 --print-ids", true);
  ASSERT_EQ(from_file.code, 0) << from_file.output;
  ASSERT_EQ(from_arg.code, 0) << from_arg.output;
  EXPECT_EQ(from_file.output, from_arg.output);
  EXPECT_GT(from_file.output.size(), 12u) << from_file.output;
  Result r = run("run -m " + model + " -f " + file + ".missing -n 1");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("cannot open '" + file + ".missing': No such file or directory"), std::string::npos) << r.output;
  const std::string empty = ::testing::TempDir() + "/empty_prompt.txt";
  std::ofstream(empty) << "\n";
  r = run("run -m " + model + " -f " + empty + " -n 1");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("-f: '" + empty + "' holds no prompt text"), std::string::npos) << r.output;
  r = run("run -m " + model + " -f " + file + " -p hi");
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("excludes"), std::string::npos) << r.output;
}

TEST(Cli, RunResumesASessionFile) {
  const std::string model = std::string(LATTE_SOURCE_DIR) + "/models/latte-tiny-mla.gguf";
  const std::string file = ::testing::TempDir() + "/run.lsess";
  std::filesystem::remove(file);
  const std::string args = "run -m " + model + " -p 'The sea and the sky' -n 10 --temp 0 --print-ids --session " + file;
  const Result first = run(args, /*stdout_only=*/true);
  ASSERT_EQ(first.code, 0) << first.output;
  ASSERT_TRUE(std::filesystem::exists(file));
  // The same prompt again: all but its last token come from the file, and
  // the reply is the same.
  const Result again = run(args);
  ASSERT_EQ(again.code, 0) << again.output;
  const auto at = again.output.find("[session " + file + ": ");
  ASSERT_NE(at, std::string::npos) << again.output;
  const std::string notice = again.output.substr(at, again.output.find('\n', at) - at);
  // "[session F: K of the prompt's N tokens reused]" with K = N - 1.
  const auto k = std::stoul(notice.substr(notice.find(": ") + 2));
  const auto n = std::stoul(notice.substr(notice.find("prompt's ") + 9));
  EXPECT_EQ(k + 1, n) << notice;
  EXPECT_NE(again.output.find("prompt: 1 token, "), std::string::npos) << again.output;
  const Result third = run(args, true);
  EXPECT_EQ(third.output, first.output);
  EXPECT_GT(first.output.size(), 10u) << first.output;
  // A conversation resumed: the next turn continues it (no BOS, no system turn).
  const std::string chat = ::testing::TempDir() + "/chat.lsess";
  std::filesystem::remove(chat);
  const std::string in = ::testing::TempDir() + "/one_turn.txt";
  std::ofstream(in) << "Hello there\n";
  Result r = run("run -m " + model + " -i --chat --system Hi -n 4 --ignore-eos --seed 1 --session " + chat + " < " + in);
  ASSERT_EQ(r.code, 0) << r.output;
  r = run("run -m " + model + " -i --chat --system Hi -n 4 --ignore-eos --seed 1 --verbose-prompt --session " + chat + " < " + in);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("[session " + chat + ": "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" tokens resumed]"), std::string::npos) << r.output;
  const std::string eos = "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";
  EXPECT_NE(r.output.find("tokens: " + eos + "User: Hello there\n\nAssistant:]"), std::string::npos) << r.output;
  // A session of another model, or a damaged file, is refused by name.
  const std::string other = ::testing::TempDir() + "/other_model.gguf";
  latte::RandomModelSpec spec;
  latte::write_random_model(spec, other);
  r = run("run -m " + other + " -p hi -n 1 --session " + file);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("was saved from another model"), std::string::npos) << r.output;
  std::ofstream(file, std::ios::app) << "x";
  r = run(args);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("trailing bytes, or its header damaged)"), std::string::npos) << r.output;
}

// Ctrl-C (SIGINT, sent 0.5 s into a generation that would run for a minute)
// stops the reply: the run then ends with 130 after its statistics, or with
// -i goes back to the prompt and ends at the end of input with 0.
TEST(Cli, CtrlCStopsTheReply) {
  const std::string cmd = std::string(LATTE_CLI) + " run -m " + std::string(LATTE_SOURCE_DIR) +
                          "/models/latte-tiny-mla.gguf -p 'The sea' -n 100000 --ignore-eos -c 100000 --seed 1";
  // $! is latte itself (the last command of the job), whose SIGINT the
  // non-interactive shell set to ignored; Latte installs its handler anyway.
  const std::string log = ::testing::TempDir() + "/ctrl_c.log";
  // Sent once the model has loaded (the handler is in place by then), so
  // that a slow start cannot meet the shell's "ignored".
  const std::string interrupt = " > " + log + " 2>&1 & pid=$!; i=0; until grep -q 'loaded ' " + log +
                                " || [ $i -ge 300 ]; do sleep 0.1; i=$((i+1)); done; sleep 0.5; kill -INT $pid; "
                                "wait $pid; echo rc=$?; cat " + log;
  Result r = run_shell(cmd + interrupt);
  EXPECT_NE(r.output.find("[interrupted after "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" of 100000 tokens]\nprompt: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rc=130"), std::string::npos) << r.output;
  r = run_shell(cmd + " -i < /dev/null" + interrupt);  // the prompt then meets the end of input
  EXPECT_NE(r.output.find("[interrupted after "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tokens]\n> \nprompt: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rc=0"), std::string::npos) << r.output;
}

TEST(Cli, InteractiveRunOutlivesAFullContext) {
  // -c 40: the second turn no longer fits after the first (its chat prompt
  // and up to 20 tokens), the third fits nowhere; the fourth still runs.
  const std::string model = std::string(LATTE_SOURCE_DIR) + "/models/latte-tiny-mla.gguf";
  const std::string bos = "<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";
  const std::string in = ::testing::TempDir() + "/turns_full.txt";
  const std::string story =
      "Tell me a long story about the sea, the sky, the stars, the moon, the sun, the wind, the rain, "
      "the snow, the hills, the rivers, the forests and the cities of the plain";
  std::ofstream(in) << "Hello there friend\nWhat now?\n" << story << "\nhi\n";
  Result r = run("run -m " + model + " -i --chat --system \"Be brief.\" --verbose-prompt -n 20 --ignore-eos --seed 3 -c 40 "
                 "--no-context-shift < " + in);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("[the context of 40 tokens is full: starting a new conversation]"), std::string::npos)
      << r.output;
  // The story is refused without ending the conversation before it (it
  // was reset first, and the next turn then went on as a later turn of an
  // empty session: no BOS, no system turn, a stray end of reply).
  EXPECT_NE(r.output.find("latte: context overflow: the turn takes "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("more than the whole context of 40: refused (the conversation goes on)"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("tokens: " + bos + "Be brief.\n\nUser: hi\n\nAssistant:]"), std::string::npos) << r.output;
  // The statistics at the end of input: the program was not ended by either.
  EXPECT_NE(r.output.find("\n> \nprompt: "), std::string::npos) << r.output;
  // -p as the first turn is refused the same way when it cannot fit, and
  // the lines read after it run (it ended the program with status 1).
  std::ofstream(in) << "hi\n";
  r = run("run -m " + model + " -i --chat -n 3 --seed 3 -c 40 -p \"" + story + "\" < " + in);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("latte: context overflow: the prompt ("), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\n> \nprompt: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("generated: 3 tokens"), std::string::npos) << r.output;
}

// Issue 42: with -c 128 the shipped model generates 600 tokens with each
// cache type, shifting the context (said on stderr) instead of stopping;
// --no-context-shift stops as before.
TEST(Cli, RunShiftsAFullContext) {
  const std::string model = std::string(LATTE_SOURCE_DIR) + "/models/latte-tiny-mla.gguf";
  for (const char* cache : {"int8", "f16", "f32"}) {
    const std::string args = "run -m " + model + " -p 'The sea and the sky' -c 128 -n 600 --ignore-eos --temp 0 "
                             "--print-ids --threads 1 --cache-type " + cache;
    const Result ids = run(args, /*stdout_only=*/true);
    ASSERT_EQ(ids.code, 0) << ids.output;
    EXPECT_EQ(std::count(ids.output.begin(), ids.output.end(), ','), 599) << cache;
    const Result r = run(args);
    EXPECT_NE(r.output.find("[context full: kept 65, dropped 63]"), std::string::npos) << r.output;  // BOS + 64
    EXPECT_NE(r.output.find("generated: 600 tokens"), std::string::npos) << r.output;
  }
  const Result stop = run("run -m " + model + " -p 'The sea' -c 128 -n 600 --ignore-eos --seed 1 --no-context-shift");
  EXPECT_EQ(stop.code, 0) << stop.output;
  EXPECT_NE(stop.output.find("the context of 128 tokens is full (raise --ctx, or drop --no-context-shift)]"),
            std::string::npos) << stop.output;
  EXPECT_EQ(stop.output.find("context full:"), std::string::npos) << stop.output;
  // --keep: the shift keeps that many.
  const Result keep = run("run -m " + model + " -p 'The sea' -c 64 -n 80 --ignore-eos --seed 1 --keep 10");
  EXPECT_NE(keep.output.find("[context full: kept 37, dropped 27]"), std::string::npos) << keep.output;
  // -i: a turn that no longer fits shifts the conversation, keeping the
  // system turn, rather than starting a new one.
  const std::string in = ::testing::TempDir() + "/turns_shift.txt";
  std::ofstream(in) << "Hello there friend\nWhat now?\nAnd then?\n";
  const Result chat = run("run -m " + model + " -i --chat --system \"Be brief.\" -n 20 --ignore-eos --seed 3 -c 48 < " + in);
  ASSERT_EQ(chat.code, 0) << chat.output;
  EXPECT_NE(chat.output.find("[context full: kept "), std::string::npos) << chat.output;
  EXPECT_EQ(chat.output.find("starting a new conversation"), std::string::npos) << chat.output;
  EXPECT_NE(chat.output.find("generated: 60 tokens"), std::string::npos) << chat.output;
  // A shifted session file resumes, but its rows past the kept start are no
  // fresh prompt's: only BOS of the same prompt is reused.
  const std::string file = ::testing::TempDir() + "/shifted.lsess";
  std::filesystem::remove(file);
  const std::string sargs = "run -m " + model + " -p 'The sea and the sky' -c 64 -n 100 --ignore-eos --seed 1 --session " + file;
  ASSERT_EQ(run(sargs).code, 0);
  const Result again = run(sargs);
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_NE(again.output.find(": 1 of the prompt's "), std::string::npos) << again.output;
}

TEST(Cli, PerplexityAndBenchShift) {
  const std::string model = std::string(LATTE_SOURCE_DIR) + "/models/latte-tiny-mla.gguf";
  const std::string text = ::testing::TempDir() + "/ppl_shift.txt";
  {
    std::ofstream out(text);
    for (int i = 0; i < 40; ++i) out << "The sea and the sky were grey, and the wind came over the hills. ";
  }
  Result r = run("perplexity -m " + model + " -f " + text + " -c 64 --shift --threads 1 --json", true);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("\"method\": \"shifted\""), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("\"shifts\": 0,"), std::string::npos) << r.output;
  r = run("perplexity -m " + model + " -f " + text + " -c 64 --shift --reprefill --threads 1 --json", true);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("\"method\": \"shifted_reprefill\""), std::string::npos) << r.output;
  EXPECT_NE(run("perplexity -m " + model + " -f " + text + " -c 64 --reprefill").code, 0);  // needs --shift
  r = run("bench -m " + model + " --shift --depths 256 --cache-type all --threads 1 -r 2 --json", true);
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* c : {"int8", "f16", "f32"})
    EXPECT_NE(r.output.find(std::string("\"cache_type\": \"") + c + "\", \"depth\": 256, \"dropped\": 127"),
              std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("null"), std::string::npos) << r.output;  // the re-prefill measured
  EXPECT_NE(run("bench -m " + model + " --depths 256 --cache-type all").code, 0);  // all: --shift only
}

// README: any command whose context goes past what the model was trained for
// says so on stderr (the shipped model: 256 tokens), and one within it does not.
TEST(Cli, ContextsPastTheTrainedOneAreSaid) {
  const std::string m = std::string(LATTE_SOURCE_DIR) + "/models/latte-tiny-mla.gguf", dir = ::testing::TempDir();
  std::string ids;
  for (int i = 0; i < 520; ++i) ids.append(i ? "," : "").append(std::to_string(1 + (i * 37) % 2000));
  std::ofstream(dir + "/long_window.txt") << ids << "\n";
  const std::string tail = " tokens, beyond the model's trained context of 256: its output there is unreliable";
  const struct { std::string args, warning; } cases[] = {
      {"run -m " + m + " -c 600 -p hi -n 1 --seed 1", "warning: --ctx reaches 600" + tail},
      {"eval -m " + m + " --tokens " + ids + " --logits-out " + dir + "/long.f32 --threads 1",
       "warning: --tokens reaches 520" + tail},
      {"bench -m " + m + " --depths 600 -p 1 -n 1 --threads 1", "warning: the deepest measurement reaches 601" + tail},
      {"perplexity -m " + m + " --windows " + dir + "/long_window.txt --threads 1",
       "warning: the longest window reaches 520" + tail},
  };
  for (const auto& c : cases) {
    const Result r = run(c.args);
    EXPECT_EQ(r.code, 0) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.warning), std::string::npos) << c.args << "\n" << r.output;
  }
  const Result within = run("run -m " + m + " -c 256 -p hi -n 1 --seed 1");
  EXPECT_EQ(within.code, 0) << within.output;
  EXPECT_EQ(within.output.find("warning:"), std::string::npos) << within.output;
}

TEST(Cli, RunWithoutAModelUsesTheShippedOne) {
  const Result r = run("run -p \"A fortune\" -n 8 --seed 1");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("latte-tiny-mla.gguf"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("generated: "), std::string::npos) << r.output;
  // The statistics (stderr) start a line of their own after the text
  // (stdout) even when both go to one pipe.
  EXPECT_NE(r.output.find("\nprompt: "), std::string::npos) << r.output;
}

TEST(Cli, RunGeneratesWithASeed) {
  const std::string m = kTestdata + "/tiny-dense.gguf";
  const Result a = run("run -m " + m + " -p hello -n 12 --seed 7 --temp 0.9 --ignore-eos --print-ids", true);
  const Result b = run("run -m " + m + " -p hello -n 12 --seed 7 --temp 0.9 --ignore-eos --print-ids", true);
  const Result c = run("run -m " + m + " -p hello -n 12 --seed 8 --temp 0.9 --ignore-eos --print-ids", true);
  ASSERT_EQ(a.code, 0) << a.output;
  EXPECT_EQ(std::count(a.output.begin(), a.output.end(), ','), 11) << a.output;  // 12 ids
  // Same seed, same tokens; another seed, others (12 draws at temperature 0.9).
  EXPECT_EQ(a.output, b.output);
  EXPECT_NE(a.output, c.output);
  const Result stats = run("run -m " + m + " -p hello -n 12 --seed 7 --temp 0.9 --ignore-eos");
  EXPECT_NE(stats.output.find("generated: 12 tokens"), std::string::npos) << stats.output;
}

TEST(Cli, RunSaysWhenTheContextCutsGenerationShort) {
  const std::string m = kTestdata + "/tiny-dense.gguf";
  const Result prompt = run("run -m " + m + " -p hello -n 1 --temp 0 --ignore-eos");
  ASSERT_EQ(prompt.code, 0) << prompt.output;
  const std::size_t at = prompt.output.find("prompt: ");
  ASSERT_NE(at, std::string::npos) << prompt.output;
  const int n_prompt = std::atoi(prompt.output.c_str() + at + 8);
  ASSERT_GT(n_prompt, 0) << prompt.output;
  // Room for exactly 4 generated tokens (the 4th is sampled, not decoded)
  // where the context is not shifted.
  const std::string ctx = " -c " + std::to_string(n_prompt + 3) + " --no-context-shift";
  const Result cut = run("run -m " + m + " -p hello -n 10 --temp 0 --ignore-eos" + ctx);
  ASSERT_EQ(cut.code, 0) << cut.output;
  EXPECT_NE(cut.output.find("generated: 4 tokens"), std::string::npos) << cut.output;
  EXPECT_NE(cut.output.find("[stopped after 4 of 10 tokens: the context of " + std::to_string(n_prompt + 3) +
                            " tokens is full (raise --ctx, or drop --no-context-shift)]\n"),
            std::string::npos)
      << cut.output;
  // Asked for no more than fits: no notice.
  const Result fits = run("run -m " + m + " -p hello -n 4 --temp 0 --ignore-eos" + ctx);
  ASSERT_EQ(fits.code, 0) << fits.output;
  EXPECT_NE(fits.output.find("generated: 4 tokens"), std::string::npos) << fits.output;
  EXPECT_EQ(fits.output.find("[stopped"), std::string::npos) << fits.output;
}

// OMP_THREAD_LIMIT below --threads: under OpenMP, oneDNN's GEMMs (prefill
// of 160+ tokens with F32 weights) split their work for the team asked and
// left the missing threads' share unwritten (logits off by up to 4.9, no
// error). Latte's threads are its own now, and oneDNN's GEMMs run on one
// of them each: OpenMP's variables change nothing, the logits are those of
// one thread.
TEST(Cli, ThreadLimitBelowThreadsKeepsTheLogits) {
  std::string ids;
  for (int i = 0; i < 200; ++i) ids.append(i ? "," : "").append(std::to_string(1 + (i * 37) % 500));
  const std::string m = kTestdata + "/tiny-dense.gguf", dir = ::testing::TempDir();
  const Result one = run("eval -m " + m + " --tokens " + ids + " --logits-out " + dir + "/tl1.f32 --threads 1");
  ASSERT_EQ(one.code, 0) << one.output;
  const Result limited = run_shell("OMP_THREAD_LIMIT=1 OMP_DYNAMIC=true " + std::string(LATTE_CLI) + " eval -m " + m +
                                   " --tokens " + ids + " --logits-out " + dir + "/tl2.f32 --threads 2");
  ASSERT_EQ(limited.code, 0) << limited.output;
  std::ifstream a(dir + "/tl1.f32", std::ios::binary), b(dir + "/tl2.f32", std::ios::binary);
  const std::string sa{std::istreambuf_iterator<char>(a), {}}, sb{std::istreambuf_iterator<char>(b), {}};
  ASSERT_EQ(sa.size(), 200u * 512 * 4);
  EXPECT_TRUE(sa == sb) << "logits differ under OMP_THREAD_LIMIT=1";
}

}  // namespace
