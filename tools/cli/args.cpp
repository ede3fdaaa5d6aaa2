// Parsing and output helpers the commands share.
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <istream>
#include <string>
#include <vector>

#include "tools/cli/commands.h"
#include "tools/paths.h"

namespace latte::cli {

std::ifstream open_input(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path_from_utf8(path), ec))
    fail(LATTE_ERR_IO, "'" + path + "' is a directory, not a file");
  std::ifstream in(path_from_utf8(path), std::ios::binary);
  if (!in) fail(LATTE_ERR_IO, "cannot open '" + path + "': " + std::strerror(errno));
  return in;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in = open_input(path);
  // Read in steps up to one byte past the limit: a file without end
  // (/dev/zero, a FIFO fed forever) is refused instead of filling memory.
  std::string text;
  char buf[1 << 16];
  while (text.size() <= kMaxInputTextBytes) {
    in.read(buf, sizeof buf);
    const std::streamsize got = in.gcount();
    if (got <= 0) break;
    text.append(buf, static_cast<std::size_t>(got));
  }
  if (in.bad()) fail(LATTE_ERR_IO, "reading '" + path + "' failed: " + std::strerror(errno));
  if (text.size() > kMaxInputTextBytes)
    fail(LATTE_ERR_INVALID_ARGUMENT, "'" + path + "' holds more than " + std::to_string(kMaxInputTextBytes >> 20) +
                                              " MiB of text, the limit of an input file: refused");
  return text;
}

LineRead read_line_bounded(std::istream& in, std::string& line) {
  line.clear();
  std::streambuf* sb = in.rdbuf();
  bool any = false;
  while (true) {
    const int c = sb->sbumpc();
    if (c == std::char_traits<char>::eof()) {
      in.setstate(std::ios::eofbit);
      return any ? LineRead::line : LineRead::end;
    }
    any = true;
    if (c == '\n') return LineRead::line;
    if (line.size() >= kMaxInputTextBytes) return LineRead::too_long;
    line.push_back(static_cast<char>(c));
  }
}

namespace {

// Parses s into *out (when given); "" or what is wrong.
std::string parse_int_list_into(const std::string& s, std::int64_t max, std::vector<std::int64_t>* out) {
  if (s.empty()) return "nothing given";
  std::size_t i = 0, count = 0;
  while (true) {
    std::size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    const std::string item = s.substr(i, j - i);
    ++count;
    // Digits only: no sign, no spaces, no empty items (a trailing comma
    // is more likely a lost number than a style).
    std::int64_t v = 0;
    bool ok = !item.empty();
    for (char c : item) {
      if (c < '0' || c > '9' || v > (max - (c - '0')) / 10) {
        ok = false;
        break;
      }
      v = v * 10 + (c - '0');
    }
    if (!ok)
      return "item " + std::to_string(count) + ", '" + item + "', is not an integer in [0, " + std::to_string(max) + "]";
    if (out) out->push_back(v);
    if (j == s.size()) break;
    i = j + 1;
  }
  return "";
}

}  // namespace

std::string int_list_problem(const std::string& s, std::int64_t max) { return parse_int_list_into(s, max, nullptr); }

std::vector<std::int64_t> parse_int_list(const std::string& s, const char* what, std::int64_t max) {
  std::vector<std::int64_t> out;
  if (const std::string problem = parse_int_list_into(s, max, &out); !problem.empty())
    fail(LATTE_ERR_INVALID_ARGUMENT, std::string(what) + ": " + problem);
  return out;
}

std::vector<std::int32_t> parse_token_list(const std::string& s, const char* what) {
  const auto wide = parse_int_list(s, what, INT32_MAX);
  return std::vector<std::int32_t>(wide.begin(), wide.end());
}

void check_token_ids(const std::vector<std::int32_t>& ids, std::int32_t n_vocab, const std::string& what) {
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= n_vocab)
      fail(LATTE_ERR_INVALID_ARGUMENT, what + ": item " + std::to_string(i + 1) + ", id " + std::to_string(ids[i]) +
                                                ", is outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);  // UTF-8 passes through; JSON allows it
        }
    }
  }
  return out + "\"";
}

latte_cache_type cache_type_of(const std::string& name) {
  if (name == "f32") return LATTE_CACHE_F32;
  if (name == "f16") return LATTE_CACHE_F16;
  if (name == "int8") return LATTE_CACHE_INT8;
  if (name == "int4") return LATTE_CACHE_INT4;
  fail(LATTE_ERR_INVALID_ARGUMENT, "'" + name + "' is not a cache type (f32, f16, int8 or int4)");
}

latte_prefill_form prefill_form_of(const std::string& name) {
  if (name == "auto") return LATTE_PREFILL_AUTO;
  if (name == "naive") return LATTE_PREFILL_NAIVE;
  if (name == "absorbed") return LATTE_PREFILL_ABSORBED;
  fail(LATTE_ERR_INVALID_ARGUMENT, "'" + name + "' is not a prefill form (auto, naive or absorbed)");
}

void warn_beyond_trained_context(std::int64_t trained, std::int64_t n_tokens, const char* what) {
  if (trained > 0 && n_tokens > trained)
    std::fprintf(stderr,
                 "warning: %s reaches %lld tokens, beyond the model's trained context of %lld: "
                 "its output there is unreliable\n",
                 what, static_cast<long long>(n_tokens), static_cast<long long>(trained));
}

}  // namespace latte::cli
