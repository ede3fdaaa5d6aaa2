// Stop strings and UTF-8 hold-back for streamed replies (text_stream.h).
#include "tools/server/text_stream.h"

#include <algorithm>

namespace latte::server {

namespace {
// The bytes a character starting with lead takes; 0 for a continuation or
// invalid byte.
int utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}
}  // namespace

bool valid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  for (std::size_t i = 0; i < n;) {
    const int len = utf8_length(p[i]);
    if (len == 0 || i + static_cast<std::size_t>(len) > n) return false;
    for (int k = 1; k < len; ++k)
      if ((p[i + k] & 0xC0) != 0x80) return false;
    if (len == 3) {
      if (p[i] == 0xE0 && p[i + 1] < 0xA0) return false;  // overlong
      if (p[i] == 0xED && p[i + 1] >= 0xA0) return false;  // surrogate
    } else if (len == 4) {
      if (p[i] == 0xF0 && p[i + 1] < 0x90) return false;  // overlong
      if (p[i] == 0xF4 && p[i + 1] >= 0x90) return false;  // past U+10FFFF
    }
    i += static_cast<std::size_t>(len);
  }
  return true;
}

std::size_t complete_utf8_prefix(const std::string& s) {
  // Look back at most 3 bytes for a lead byte whose character is cut.
  const std::size_t n = s.size();
  for (std::size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: keep looking
    const int len = utf8_length(c);
    return len > static_cast<int>(back) ? n - back : n;
  }
  return n;
}

bool TextStream::add(const std::string& piece) {
  if (stopped_) return true;
  const std::size_t before = text_.size();
  text_ += piece;
  std::size_t longest = 0;
  for (const std::string& s : stop_) longest = std::max(longest, s.size());
  // A stop string can only end in the new bytes: search from where it could start.
  const std::size_t from = before >= longest ? before - longest + 1 : 0;
  std::size_t cut = std::string::npos;
  for (const std::string& s : stop_) {
    const std::size_t at = text_.find(s, std::max(from, sent_));
    if (at != std::string::npos) cut = std::min(cut, at);
  }
  if (cut == std::string::npos) return false;
  text_.resize(cut);
  stopped_ = true;
  return true;
}

std::string TextStream::release() {
  std::size_t end = stopped_ ? text_.size() : complete_utf8_prefix(text_);
  if (!stopped_) {
    // Hold back the longest tail that begins some stop string.
    std::size_t hold = 0;
    for (const std::string& s : stop_) {
      const std::size_t most = std::min(s.size() - 1, text_.size() - sent_);
      for (std::size_t k = most; k > hold; --k)
        if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
          hold = k;
          break;
        }
    }
    end = std::min(end, text_.size() - hold);
  }
  if (end <= sent_) return {};
  std::string out = text_.substr(sent_, end - sent_);
  sent_ = end;
  return out;
}

std::string TextStream::flush() {
  stopped_ = true;
  return release();
}

}  // namespace latte::server
