// The `latte` command line as a careful user meets it (issues 53 and 55):
// random seeds said on stderr, defaults in --help, exit statuses, progress
// on a terminal only, notes on lines of their own, line editing, signals
// that leave files whole, chat turns that reuse the session, and the
// wording of what it says.
#include <gtest/gtest.h>

#if LATTE_TEST_POSIX  // POSIX by nature: shells, signals, pseudo-terminals, rlimits

#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include "runtime/model/model.h"
#include "runtime/session/session.h"
#include "runtime/tokenizer/chat.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/cli/cli_run.h"
#include "tools/random_model.h"

namespace {

using latte::test::Result;
using latte::test::run;
using latte::test::run_command;
using latte::test::run_on_terminal;
using latte::test::run_shell;
using latte::test::TerminalStep;

const std::string kTestdata = LATTE_TESTDATA_DIR;
const std::string kShipped = std::string(LATTE_SOURCE_DIR) + "/models/latte-tiny-mla.gguf";
const std::string kCli = LATTE_CLI;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// stdout and stderr of one run, apart.
struct Split {
  int code;
  std::string out, err;
};
Split run_split(const std::string& args) {
  const std::string err = ::testing::TempDir() + "/split_stderr.txt";
  const Result r = run_command(kCli + " " + args + " 2>" + err);
  return {r.code, r.output, read_file(err)};
}

// The number after `key` in text ("seed: " -> 123), or -1.
long long number_after(const std::string& text, const std::string& key, std::size_t from = 0) {
  const std::size_t at = text.find(key, from);
  return at == std::string::npos ? -1 : std::stoll(text.substr(at + key.size()));
}

// The files in a folder whose names start with `prefix`.
std::vector<std::string> files_starting(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path().filename().string());
  return out;
}

// -----------------------------------------------------------------------
// Seeds

// Without --seed a run draws a seed of its own and says it; --seed N then
// gives the same text again, and a run with --seed says nothing of it.
TEST(CliUx, RunSeedsAtRandomAndSaysTheSeed) {
  const std::string args = "run -m " + kShipped + " -p 'The sea' -n 100 --ignore-eos --print-ids --threads 1";
  const Split a = run_split(args), b = run_split(args);
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  // The seed's digits (any 64-bit value), on a line of their own.
  const auto seed_of = [](const std::string& err) {
    const std::size_t at = err.find("\nseed: ");
    if (at == std::string::npos) return std::string();
    const std::string digits = err.substr(at + 7, err.find('\n', at + 7) - at - 7);
    return digits.find_first_not_of("0123456789") == std::string::npos ? digits : std::string();
  };
  const std::string seed_a = seed_of(a.err), seed_b = seed_of(b.err);
  ASSERT_FALSE(seed_a.empty()) << a.err;
  ASSERT_FALSE(seed_b.empty()) << b.err;
  EXPECT_NE(seed_a, seed_b);
  // 100 draws at temperature 0.8: the same ids twice by chance is negligible.
  EXPECT_EQ(std::count(a.out.begin(), a.out.end(), ','), 99) << a.out;
  EXPECT_NE(a.out, b.out);
  // The seed said repeats the run.
  const Split again = run_split(args + " --seed " + seed_a);
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(again.out, a.out);
  EXPECT_EQ(again.err.find("seed: "), std::string::npos) << again.err;
  // Greedy decoding draws nothing: no seed to say.
  const Split greedy = run_split("run -m " + kShipped + " -p 'The sea' -n 4 --temp 0");
  ASSERT_EQ(greedy.code, 0) << greedy.err;
  EXPECT_EQ(greedy.err.find("seed: "), std::string::npos) << greedy.err;
}

// -----------------------------------------------------------------------
// --help

TEST(CliUx, HelpShowsTheDefaults) {
  const struct {
    std::string command, line_start, value;
  } cases[] = {
      {"run", "  -n,--n-predict ", "=128"},      {"run", "  --temp ", "=0.8"},
      {"run", "  --top-k ", "=40"},              {"run", "  --cache-type ", "=int8"},
      {"run", "  --threads ", "=0"},             {"bench", "  -p,--n-prompt ", "=512"},
      {"bench", "  -n,--n-gen ", "=32"},         {"bench", "  -r,--repetitions ", "=1"},
      {"bench", "  --depths ", "=0"},            {"perplexity", "  -c,--ctx ", "=512"},
      {"perplexity", "  --cache-type ", "=f32"}, {"make-model", "  --preset ", "=v2-lite"},
      {"make-model", "  --type ", "=F16"},       {"make-model", "  --layers ", "=4"},
      {"make-model", "  --vocab ", "=1024"},     {"make-model", "  --seed ", "=1"},
      {"eval", "  --prefill-chunk ", "=512"},    {"demo", "  --tokens ", "=16"},
  };
  for (const auto& c : cases) {
    const Result r = run(c.command + " --help", /*stdout_only=*/true);
    ASSERT_EQ(r.code, 0) << r.output;
    const std::size_t at = r.output.find("\n" + c.line_start);
    ASSERT_NE(at, std::string::npos) << c.command << ": " << c.line_start << "\n" << r.output;
    const std::string line = r.output.substr(at + 1, r.output.find('\n', at + 1) - at - 1);
    EXPECT_NE(line.find(c.value), std::string::npos) << c.command << ": " << line;
  }
  // Where the default is no fixed value, the help says what it is instead.
  const Result r = run("run --help", true);
  EXPECT_NE(r.output.find("(default: a random one, printed on stderr as 'seed: N'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--seed UINT  "), std::string::npos) << r.output;  // no "=" value
}

// -----------------------------------------------------------------------
// Exit status: 0 success, 1 an error while running, 2 a wrong command line

TEST(CliUx, ExitStatusSaysWhatKindOfFailure) {
  const std::string m = kTestdata + "/tiny-dense.gguf", dir = ::testing::TempDir();
  std::ofstream(dir + "/one_window.txt") << "1,2,3\n";
  const struct {
    std::string args;
    int code;
    std::string says;
  } cases[] = {
      {"--version", 0, "latte "},
      {"run --help", 0, "Usage:"},
      {"info --models", 0, "DeepSeek-V2-Lite"},
      {"", 2, "A subcommand is required"},
      {"frobnicate", 2, "unknown command 'frobnicate'"},
      {"run --frobnicate -p hi", 2, "--frobnicate"},
      {"run -p hi --temp abc", 2, "--temp: 'abc' is not a finite number"},
      {"run -p hi -n", 2, "-n"},
      {"run -m " + m + " --top-k -3 -p hi", 2, "--top-k"},
      {"eval --tokens 1 --logits-out " + dir + "/x.f32", 2, "--model is required"},
      {"eval -m " + m + " --tokens 1,x --logits-out " + dir + "/x.f32", 2, "--tokens: item 2, 'x'"},
      {"bench -m " + m + " --depths 4,", 2, "--depths: item 2, ''"},
      {"bench -m " + m + " --cache-type all", 2, "--cache-type all applies to --shift only"},
      {"bench -m " + m + " -p 0 -n 0", 2, "nothing to measure"},
      {"perplexity -m " + m + " --windows " + dir + "/one_window.txt --llama-cpp", 2, "--llama-cpp applies to -f"},
      {"perplexity -m " + m + " --windows " + dir + "/one_window.txt --shift", 2, "--shift applies to -f"},
      {"perplexity -m " + m + " -f " + dir + "/one_window.txt -c 16 --shift --keep 15", 2, "--keep 15 leaves no room"},
      {"make-model --preset v2 -o " + dir + "/x.gguf", 2, "v2 not in {v2-lite,v2-lite-moe,minicpm3-4b,plm-1.8b,tiny}"},
      {"make-model --type Q9_9 -o " + dir + "/x.gguf", 2, "'Q9_9' is not a weight type"},
      {"info -m " + m + " " + m, 2, "not both"},
      {"info", 2, "give a GGUF FILE (or -m FILE), or --models"},
      {"run -m " + m + " -p hi -c 16 --keep 16", 2, "--keep 16 keeps the whole context"},
      {"demo --tokens 0", 2, "--tokens"},
      {"info /nonexistent/x.gguf", 1, "/nonexistent/x.gguf"},
      {"run -m /nonexistent/x.gguf -p hi", 1, "/nonexistent/x.gguf"},
      {"eval -m " + m + " --tokens 1,99999 --logits-out " + dir + "/x.f32", 1, "id 99999"},
      {"run -m " + m + " -p hello -c 1", 1, "does not fit the context of 1"},
  };
  for (const auto& c : cases) {
    const Result r = run(c.args);
    EXPECT_EQ(r.code, c.code) << "latte " << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << "latte " << c.args << "\n" << r.output;
  }
}

// An empty path names no file: refused by option before anything runs
// (make-model wrote its whole temporary in the working directory, then
// failed to rename it to ''; run --session '' ran without a session).
TEST(CliUx, EmptyPathsAreRefused) {
  const std::string m = kTestdata + "/tiny-dense.gguf";
  const std::string cwd = ::testing::TempDir() + "/empty_paths_cwd";
  std::filesystem::remove_all(cwd);
  std::filesystem::create_directories(cwd);
  const struct {
    std::string args, says;
  } cases[] = {
      {"info ''", "FILE: an empty path names no file"},
      {"info -m ''", "--model: an empty path names no file"},
      {"eval -m '' --tokens 1 --logits-out o.f32", "--model: an empty path names no file"},
      {"eval -m " + m + " --tokens 1 --logits-out ''", "--logits-out: an empty path names no file"},
      {"eval -m " + m + " --tokens '' --logits-out o.f32", "--tokens: nothing given"},
      {"bench -m ''", "--model: an empty path names no file"},
      {"bench -m " + m + " --depths ''", "--depths: nothing given"},
      {"run -m '' -p hi", "-m was given an empty path"},
      {"run -m " + m + " -f ''", "--file: an empty path names no file"},
      {"run -m " + m + " -p hi --session ''", "--session: an empty path names no file"},
      {"run -m " + m + " --prompt-ids ''", "--prompt-ids: nothing given"},
      {"perplexity -m '' -f x.txt", "--model: an empty path names no file"},
      {"perplexity -m " + m + " --windows ''", "--windows: an empty path names no file"},
      {"perplexity -m " + m + " -f ''", "--file: an empty path names no file"},
      {"make-model --preset tiny --layers 1 -o ''", "--out: an empty path names no file"},
  };
  for (const auto& c : cases) {
    const Result r = run_shell("cd " + cwd + " && " + kCli + " " + c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_EQ(r.output.find("loaded "), std::string::npos) << c.args << ": refused only after loading\n" << r.output;
  }
  EXPECT_TRUE(std::filesystem::is_empty(cwd)) << "a file was left in the working directory";
}

// -----------------------------------------------------------------------
// make-model's types, info -m

TEST(CliUx, WeightTypesTakeAnyCase) {
  const std::string dir = ::testing::TempDir();
  for (const char* type : {"q4_k", "Q4_K", "q8_0"}) {
    const std::string out = dir + "/case_" + type + ".gguf";
    Result r = run(std::string("make-model --preset tiny --layers 1 --vocab 300 --type ") + type + " -o " + out);
    ASSERT_EQ(r.code, 0) << type << "\n" << r.output;
    std::string upper = type;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_NE(r.output.find(", " + upper + " weights"), std::string::npos) << r.output;
    r = run("info " + out, /*stdout_only=*/true);
    EXPECT_NE(r.output.find(" " + upper + " x"), std::string::npos) << r.output;
  }
  // A llama.cpp mix: named as one, with its main type and the list.
  const Result mix = run("make-model --type Q4_K_M -o " + dir + "/mix.gguf");
  EXPECT_EQ(mix.code, 2) << mix.output;
  EXPECT_NE(mix.output.find("'Q4_K_M' is one of llama.cpp's mixes of types, not a type"), std::string::npos) << mix.output;
  EXPECT_NE(mix.output.find("give Q4_K"), std::string::npos) << mix.output;
  EXPECT_NE(mix.output.find("F32, F16, BF16, Q4_0"), std::string::npos) << mix.output;
  EXPECT_FALSE(std::filesystem::exists(dir + "/mix.gguf"));
}

TEST(CliUx, InfoTakesTheModelAsMOrFile) {
  const std::string m = kTestdata + "/tiny-dense.gguf";
  const Result positional = run("info " + m, true), option = run("info -m " + m, true), long_option = run("info --model " + m, true);
  ASSERT_EQ(positional.code, 0) << positional.output;
  EXPECT_EQ(option.code, 0) << option.output;
  EXPECT_EQ(option.output, positional.output);
  EXPECT_EQ(long_option.output, positional.output);
  EXPECT_NE(positional.output.find("kv_lora (d_c) 64"), std::string::npos) << positional.output;
}

// -----------------------------------------------------------------------
// Progress: on a terminal, one line rewritten in place; in a pipe, none

TEST(CliUx, ProgressOnlyOnATerminal) {
  const std::string dir = ::testing::TempDir(), m = kTestdata + "/tiny-dense.gguf";
  std::ofstream(dir + "/progress_windows.txt") << "1,2,3,4\n5,6,7,8\n9,10,11\n";
  const std::string commands[] = {
      "run -m " + m + " -p hello -n 4 --seed 1",
      "make-model --preset tiny --layers 2 --vocab 300 -o " + dir + "/progress.gguf",
      "perplexity -m " + m + " --windows " + dir + "/progress_windows.txt",
      "bench -m " + m + " --depths 0,16 -p 4 -n 2 --threads 1",
  };
  for (const std::string& c : commands) {
    const Result piped = run(c);
    ASSERT_EQ(piped.code, 0) << c << "\n" << piped.output;
    EXPECT_EQ(piped.output.find('\r'), std::string::npos) << c << "\n" << piped.output;
  }
  // stderr on a terminal: each command's progress line, rewritten with '\r',
  // erased (spaces, '\r') before what follows it.
  const struct {
    std::string command, progress, after;
  } on_terminal[] = {
      {commands[0], "\rloading tiny-dense.gguf: ", " \rloaded " + m + ": "},
      {commands[1], "\rmake-model progress.gguf: weights ", " \rwrote " + dir + "/progress.gguf: "},
      {commands[2], "\rperplexity: window 1 / 3", ""},
      {commands[3], "\rbench: depth 16: filling the cache (a prefill of 16 tokens)", " \rdepth 16 done"},
  };
  for (const auto& c : on_terminal) {
    const Result r = run_on_terminal(kCli + " " + c.command, /*stdin_on_terminal=*/false);
    ASSERT_EQ(r.code, 0) << c.command << "\n" << r.output;
    EXPECT_NE(r.output.find(c.progress), std::string::npos) << c.command << "\n" << r.output;
    EXPECT_NE(r.output.find(c.after), std::string::npos) << c.command << "\n" << r.output;
  }
  // The load's line: a share of the whole load (latte.h's bytes_total: the
  // read and any re-layout), never falling.
  const Result r = run_on_terminal(kCli + " " + commands[0] + " --no-mmap", /*stdin_on_terminal=*/false);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::regex line(R"(\rloading tiny-dense\.gguf: ([0-9]+)%)");
  int shown = 0, last = -1;
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), line); it != std::sregex_iterator(); ++it) {
    const int percent = std::stoi((*it)[1]);
    EXPECT_GE(percent, last) << r.output;
    EXPECT_LE(percent, 100) << r.output;
    last = percent;
    ++shown;
  }
  EXPECT_GE(shown, 1) << r.output;
}

// -----------------------------------------------------------------------
// Notes on lines of their own

// A context shift's note lands in the middle of the text; where stdout and
// stderr go to one place it starts a line of its own (it was glued to the
// text: "...and the LORD[context full: kept 129, dropped 127]"), and where
// they go apart neither gains a line.
TEST(CliUx, NotesStartALineOfTheirOwn) {
  // Ids, not text: the text could hold newlines of its own.
  const std::string args =
      "run -m " + kShipped + " -p 'The sea and the sky' -c 64 -n 120 --ignore-eos --seed 1 --threads 1 --print-ids";
  const Result merged = run(args);
  ASSERT_EQ(merged.code, 0) << merged.output;
  std::size_t notes = 0;
  for (std::size_t at = merged.output.find("[context full"); at != std::string::npos;
       at = merged.output.find("[context full", at + 1)) {
    ++notes;
    EXPECT_EQ(merged.output[at - 1], '\n') << merged.output;
  }
  EXPECT_GE(notes, 1u) << merged.output;
  // Apart: stdout is the ids alone (one line), stderr has no empty line.
  const Split apart = run_split(args);
  ASSERT_EQ(apart.code, 0) << apart.err;
  EXPECT_EQ(std::count(apart.out.begin(), apart.out.end(), '\n'), 1) << apart.out;
  EXPECT_EQ(apart.err.find("\n\n"), std::string::npos) << apart.err;
  EXPECT_NE(apart.err.find("\n[context full"), std::string::npos) << apart.err;
}

// -----------------------------------------------------------------------
// -i on a terminal: line editing and history (libedit)

#if LATTE_CLI_LIBEDIT
TEST(CliUx, InteractiveInputIsEditedOnATerminal) {
  const std::string out = ::testing::TempDir() + "/edit_stdout.txt";
  const std::string cmd = "TERM=xterm " + kCli + " run -m " + kShipped +
                          " -i --verbose-prompt -n 2 --temp 0 --threads 1 --print-ids > " + out;
  // A line; the same again from the history (up arrow); one edited (a
  // character put in before the last with the left arrow); Ctrl-D.
  const Result r = run_on_terminal(cmd, /*stdin_on_terminal=*/true,
                                   {{"> ", "Hello\r"},
                                    {"Hello]", ""},
                                    {"> ", "\x1b[A\r"},
                                    {"Hello]", ""},
                                    {"> ", "abc\x1b[DX\r"},
                                    {"abXc]", ""},
                                    {"> ", "\x04"}});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("interactive: one prompt per line (line editing), end with Ctrl-D"), std::string::npos)
      << r.output;
  std::size_t hellos = 0;
  for (std::size_t at = r.output.find("Hello]"); at != std::string::npos; at = r.output.find("Hello]", at + 1)) ++hellos;
  EXPECT_EQ(hellos, 2u) << r.output;
  EXPECT_NE(r.output.find(" tokens: abXc]"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("^[[A"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("prompt: "), std::string::npos) << r.output;
  // Three replies of two tokens on stdout, one line each.
  const std::string ids = read_file(out);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), '\n'), 3) << ids;
  EXPECT_EQ(std::count(ids.begin(), ids.end(), ','), 3) << ids;
}
#else
// A build without libedit (a cross build) reads lines plainly on a
// terminal too.
TEST(CliUx, InteractiveInputIsReadPlainlyWithoutLibedit) {
  const std::string cmd = kCli + " run -m " + kShipped + " -i --verbose-prompt -n 2 --temp 0 --threads 1";
  const Result r = run_on_terminal(cmd, /*stdin_on_terminal=*/true, {{"> ", "Hello\n"}, {"Hello]", ""}, {"> ", "\x04"}});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("interactive: one prompt per line, end with Ctrl-D"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Hello]"), std::string::npos) << r.output;
}
#endif

// -----------------------------------------------------------------------
// Signals

// perplexity on Ctrl-C: the windows scored so far, marked partial, exit
// 130; on SIGTERM the same with 143. The signal is sent once the progress
// line (stderr on a terminal) shows a window begun after the first.
TEST(CliUx, PerplexityReportsThePartialResultWhenStopped) {
  // 1778 windows of 32 tokens, token by token through the decode kernel:
  // minutes for the whole text.
  const std::string dir = ::testing::TempDir(), text = std::string(LATTE_SOURCE_DIR) + "/models/heldout.txt";
  const std::string args = " perplexity -m " + kShipped + " -f " + text + " -c 32 --decode --threads 1";
  for (const auto& [signal, code] : {std::pair{SIGINT, 130}, std::pair{SIGTERM, 143}}) {
    const std::string json = dir + "/ppl_stop.json";
    std::filesystem::remove(json);
    const Result r = run_on_terminal("exec " + kCli + args + " --json > " + json, /*stdin_on_terminal=*/false,
                                     {{"window 1 / ", ""}, {"perplexity: window ", "", signal}});
    EXPECT_EQ(r.code, code) << r.output;
    const std::string result = read_file(json);
    EXPECT_NE(result.find("\"partial\": true"), std::string::npos) << result;
    const long long windows = number_after(result, "\"windows\": "), total = number_after(result, "\"windows_total\": ");
    EXPECT_GE(windows, 1) << result;
    EXPECT_LT(windows, total) << result;
    // Whole windows only: 31 tokens predicted in each.
    EXPECT_EQ(number_after(result, "\"predicted\": "), windows * 31) << result;
  }
  // The text form says it too.
  const std::string out = dir + "/ppl_stop.txt";
  const Result r = run_on_terminal("exec " + kCli + args + " > " + out, false,
                                   {{"window 1 / ", ""}, {"perplexity: window ", "", SIGINT}});
  EXPECT_EQ(r.code, 130) << r.output;
  const std::string result = read_file(out);
  EXPECT_EQ(result.rfind("partial (interrupted after ", 0), 0u) << result;
  EXPECT_NE(result.find(" of 1778 windows): "), std::string::npos) << result;
}

// SIGTERM during `run -i --session F` mid-conversation: the reply stops, F
// is saved whole (a later run resumes it), no temporary F.* is left, and
// the exit status is 143. It used to leave F.XXXXXX temporaries behind.
TEST(CliUx, SigtermLeavesTheSessionWhole) {
  const std::string dir = ::testing::TempDir() + "/sigterm_session";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/k.bin", in = dir + "/turn.txt";
  std::ofstream(in) << "Hello there\n";
  const std::string base =
      kCli + " run -m " + kShipped + " -i --chat --ignore-eos --seed 2 --threads 1 -c 4096 --session " + file;
  // A first turn saved.
  Result r = run_shell(base + " -n 4 < " + in);
  ASSERT_EQ(r.code, 0) << r.output;
  const long long first = std::filesystem::file_size(file);
  // A second turn that would run for minutes, stopped by SIGTERM once it
  // has begun (its first token out).
  const std::string log = dir + "/log.txt", out = dir + "/out.txt";
  r = run_shell(base + " -n 100000 < " + in + " > " + out + " 2> " + log +
                " & pid=$!; i=0; until [ -s " + out + " ] || [ $i -ge 300 ]; do sleep 0.1; i=$((i+1)); done; "
                "sleep 0.5; kill -TERM $pid; wait $pid; echo rc=$?; cat " + log);
  EXPECT_NE(r.output.find("rc=143"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[stopped by SIGTERM after "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nprompt: "), std::string::npos) << r.output;  // it ended by its own path
  EXPECT_EQ(files_starting(dir, "k.bin."), std::vector<std::string>{});
  // F whole: a run resumes it, longer than the first turn alone.
  EXPECT_GT(static_cast<long long>(std::filesystem::file_size(file)), first);
  r = run_shell(base + " -n 1 < /dev/null");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find(" tokens resumed]"), std::string::npos) << r.output;
  // SIGTERM while waiting for a line: the same clean end.
  latte::test::Result idle = run_shell(
      "mkfifo " + dir + "/fifo && (" + base + " -n 2 < " + dir + "/fifo > " + out + " 2> " + log +
      " & pid=$!; exec 3>" + dir + "/fifo; echo hi >&3; i=0; until grep -q 'turn 1:' " + log +
      " || [ $i -ge 300 ]; do sleep 0.1; i=$((i+1)); done; sleep 0.3; kill -TERM $pid; wait $pid; echo rc=$?; "
      "exec 3>&-; cat " + log + ")");
  EXPECT_NE(idle.output.find("rc=143"), std::string::npos) << idle.output;
  EXPECT_EQ(files_starting(dir, "k.bin."), std::vector<std::string>{});
}

// -----------------------------------------------------------------------
// Files written whole

// eval writes its logits through a temporary: a write that fails (here the
// file-size limit, as a full disk would) leaves an earlier file as it was,
// and no temporary.
TEST(CliUx, EvalKeepsTheOldLogitsWhenTheWriteFails) {
  const std::string dir = ::testing::TempDir() + "/eval_atomic";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string out = dir + "/logits.f32";
  const std::string old_bytes = "the logits of an earlier run";
  std::ofstream(out, std::ios::binary) << old_bytes;
  std::string ids;
  for (int i = 0; i < 64; ++i) ids.append(i ? "," : "").append(std::to_string(1 + i));
  // 64 x 512 floats = 128 KiB, past a 16 KiB limit; SIGXFSZ ignored, so the
  // write fails with EFBIG instead of killing the process.
  const Result r = run_shell("trap '' XFSZ; ulimit -f 16; " + kCli + " eval -m " + kTestdata +
                             "/tiny-dense.gguf --tokens " + ids + " --logits-out " + out + " --threads 1");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("write logits: writing '" + out + "' failed"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(out), old_bytes);
  EXPECT_EQ(files_starting(dir, "logits.f32."), std::vector<std::string>{});
  // Without the limit it is replaced whole.
  const Result ok = run("eval -m " + kTestdata + "/tiny-dense.gguf --tokens " + ids + " --logits-out " + out + " --threads 1");
  ASSERT_EQ(ok.code, 0) << ok.output;
  EXPECT_EQ(std::filesystem::file_size(out), 64u * 512 * 4);
}

// make-model stopped by Ctrl-C or SIGTERM while it works: nothing written,
// not even the temporary of the file it was writing (it left one of up to
// gigabytes).
TEST(CliUx, MakeModelStoppedWritesNothing) {
  const std::string dir = ::testing::TempDir() + "/make_model_stop";
  for (const auto& [signal, code] : {std::pair{"INT", 130}, std::pair{"TERM", 143}}) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    // V2-Lite's shapes: tens of seconds of weights to make.
    const Result r = run_shell(kCli + " make-model --preset v2-lite --layers 8 -o " + dir +
                               "/m.gguf 2>&1 & pid=$!; sleep 1; kill -" + signal + " $pid; wait $pid; echo rc=$?");
    EXPECT_NE(r.output.find("rc=" + std::to_string(code)), std::string::npos) << signal << "\n" << r.output;
    EXPECT_NE(r.output.find(": nothing written"), std::string::npos) << r.output;
    EXPECT_TRUE(std::filesystem::is_empty(dir)) << signal;
  }
}

// eval writes to a pipe or a device as it comes (nothing there to replace).
TEST(CliUx, EvalWritesToAPipe) {
  const Result r = run_shell(kCli + " eval -m " + kTestdata + "/tiny-dense.gguf --tokens 1,2,3 --logits-out /dev/stdout "
                             "--threads 1 2>/dev/null | wc -c");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(std::stoll(r.output), 3 * 512 * 4) << r.output;
}

// A session that cannot be saved is named as given, not by its temporary.
TEST(CliUx, SessionErrorsNameThePathGiven) {
  const std::string file = ::testing::TempDir() + "/no_such_dir/k.bin";
  const Result r = run("run -m " + kShipped + " -p hi -n 1 --seed 1 --session " + file);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("save session: cannot create a temporary beside '" + file + "'"), std::string::npos)
      << r.output;
}

// -----------------------------------------------------------------------
// --keep against the context

TEST(CliUx, KeepMustLeaveRoomInTheContext) {
  Result r = run("run -m " + kShipped + " -p hi -n 1 -c 16 --keep 100");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--keep 100 keeps the whole context of --ctx 16"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("loaded "), std::string::npos) << r.output;  // refused before the load
  // Against the default context (the shipped model's trained 256 tokens).
  r = run("run -m " + kShipped + " -p hi -n 1 --keep 256");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--keep 256 keeps the whole context of 256 tokens"), std::string::npos) << r.output;
  r = run("run -m " + kShipped + " -p hi -n 1 --keep 255 --seed 1");
  EXPECT_EQ(r.code, 0) << r.output;
}

// -----------------------------------------------------------------------
// Wording

TEST(CliUx, CountsAgreeWithTheirNouns) {
  const std::string dir = ::testing::TempDir();
  latte::RandomModelSpec moe;
  moe.n_layers = 3;
  moe.n_experts = 4, moe.n_experts_used = 2, moe.ff_expert = 32, moe.n_leading_dense = 1;
  latte::write_random_model(moe, dir + "/one_dense.gguf");
  Result r = run("info " + dir + "/one_dense.gguf", true);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("ffn:           1 dense layer (ff 96), then MoE: 4 experts"), std::string::npos) << r.output;
  std::ofstream(dir + "/one_window.txt") << "1,2\n";
  r = run("perplexity -m " + kTestdata + "/tiny-dense.gguf --windows " + dir + "/one_window.txt", true);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("1 window, 1 predicted token: mean NLL ", 0), 0u) << r.output;
}

// A copy of the program without the shipped model beside it says which file
// it looked for and what to do instead.
TEST(CliUx, MissingShippedModelSaysWhereItLooked) {
  std::string dir = ::testing::TempDir() + "/bare_install";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/bin");
  dir = std::filesystem::canonical(dir).string();  // as the program finds itself
  // LATTE_CLI may start with an emulator: the program is its last word.
  const std::string program = kCli.substr(kCli.find_last_of(' ') + 1);
  const std::string prefix = kCli.substr(0, kCli.size() - program.size());
  std::filesystem::copy_file(program, dir + "/bin/latte");
  std::filesystem::permissions(dir + "/bin/latte", std::filesystem::perms::owner_all);
  Result r = run_shell("env -u LATTE_MODEL " + prefix + dir + "/bin/latte run -p hi -n 1");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("'" + dir + "/share/latte/latte-tiny-mla.gguf'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("give -m FILE, or set LATTE_MODEL"), std::string::npos) << r.output;
  r = run_shell("LATTE_MODEL=" + dir + "/none.gguf " + prefix + dir + "/bin/latte run -p hi -n 1");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("LATTE_MODEL names '" + dir + "/none.gguf', which does not exist"), std::string::npos)
      << r.output;
}

// bench --shift reports the threads it ran with (it printed "threads 0"
// for the default, and timed the shift on one thread where no re-prefill
// was measured).
TEST(CliUx, BenchShiftReportsItsThreads) {
  auto model = latte::Model::load(kShipped);
  latte::SessionOptions so;
  so.n_ctx = 1;
  const int threads = latte::Session(model, so).threads();
  for (const char* extra : {"", " --reprefill-max 0"}) {
    const Result r = run("bench -m " + kShipped + " --shift --depths 64 -r 1" + std::string(extra), true);
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find(", threads " + std::to_string(threads) + ", medians of 1"), std::string::npos)
        << extra << "\n" << r.output;
  }
}

// -----------------------------------------------------------------------
// Chat turns: only the new turn is computed

// For each chat format, a 3-turn conversation (replies cut short by -n, so
// each later turn opens with the end-of-reply marker): the tokens computed
// for a turn are exactly its own (the marker, the user turn, the assistant
// opening), the rest is reused from the session, and the session holds the
// prompts and the replies exactly as the model generated them.
TEST(CliUx, ChatTurnsComputeOnlyTheNewTurn) {
  const std::string dir = ::testing::TempDir();
  // deepseek3 and chatml need their markers in the vocabulary: a random
  // model with them as control tokens.
  latte::RandomModelSpec spec;
  spec.n_vocab = 320;
  spec.control_tokens = {"<\xEF\xBD\x9C" "User\xEF\xBD\x9C>", "<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>", "<|im_start|>",
                         "<|im_end|>"};
  const std::string markers = dir + "/chat_markers.gguf";
  latte::write_random_model(spec, markers);
  const std::string in = dir + "/three_turns.txt";
  const std::vector<std::string> turns = {"Hello there", "What now?", "And then?"};
  std::ofstream(in) << turns[0] << "\n" << turns[1] << "\n" << turns[2] << "\n";
  for (const auto& [format, path] : {std::pair{latte::ChatFormat::deepseek2, kShipped},
                                     std::pair{latte::ChatFormat::deepseek3, markers},
                                     std::pair{latte::ChatFormat::chatml, markers}}) {
    const std::string name(latte::chat_format_name(format));
    const std::string session = dir + "/turns_" + name + ".lsess";
    std::filesystem::remove(session);
    const Split r = run_split("run -m " + path + " -i --chat --chat-format " + name + " --system 'Be brief.' -n 5 " +
                              "--ignore-eos --print-ids --seed 4 --threads 1 --session " + session + " < " + in);
    ASSERT_EQ(r.code, 0) << name << "\n" << r.err;
    auto model = latte::Model::load(path);
    const latte::Tokenizer& tok = *model->tokenizer();
    const latte::ChatFormatter chat(tok, format);
    // The replies' ids, one line each on stdout.
    std::vector<std::vector<std::int32_t>> replies;
    for (std::size_t at = 0; at < r.out.size();) {
      const std::size_t end = r.out.find('\n', at);
      std::vector<std::int32_t> ids;
      for (std::size_t i = at; i < end;) {
        const std::size_t comma = std::min(r.out.find(',', i), end);
        ids.push_back(std::stoi(r.out.substr(i, comma - i)));
        i = comma + 1;
      }
      replies.push_back(ids);
      at = end + 1;
    }
    ASSERT_EQ(replies.size(), 3u) << name << "\n" << r.out;
    std::vector<std::int32_t> expected;  // the session's tokens
    for (std::size_t t = 0; t < 3; ++t) {
      std::vector<latte::ChatTurn> msgs;
      if (t == 0) msgs.push_back({"system", "Be brief."});
      msgs.push_back({"user", turns[t]});
      const auto prompt = chat.encode(msgs, true, t == 0 && chat.add_bos(), t == 0 ? "" : chat.reply_end_after(-1));
      const std::string note = "[turn " + std::to_string(t + 1) + ": ";
      const std::size_t at = r.err.find(note);
      ASSERT_NE(at, std::string::npos) << name << "\n" << r.err;
      EXPECT_EQ(r.err[at - 1], '\n') << name << ": the note follows the prompt on its line\n" << r.err;
      const std::string line = r.err.substr(at, r.err.find('\n', at) - at);
      EXPECT_EQ(line, note + std::to_string(prompt.size()) + " prompt tokens computed, " +
                          std::to_string(expected.size()) + " reused from the session, 5 generated]")
          << name;
      EXPECT_EQ(replies[t].size(), 5u) << name;
      expected.insert(expected.end(), prompt.begin(), prompt.end());
      expected.insert(expected.end(), replies[t].begin(), replies[t].end());
    }
    latte::SessionOptions so;
    so.cache = latte::LatentStorage::int8;
    so.n_ctx = 4096;
    latte::Session s(model, so);
    s.load_state(session);
    const auto held = s.tokens();
    EXPECT_EQ(std::vector<std::int32_t>(held.begin(), held.end()), expected) << name;
  }
}

}  // namespace

#endif  // LATTE_TEST_POSIX
