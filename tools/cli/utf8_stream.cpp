// Utf8Stream: UTF-8 checked sequence by sequence (RFC 3629's table of
// well-formed byte sequences: no overlongs, surrogates or values past
// U+10FFFF).
#include "tools/cli/utf8_stream.h"

#include <cstddef>

namespace latte::cli {

namespace {

constexpr const char* kReplacement = "\xEF\xBF\xBD";

// The length of the sequence b0 starts (0: b0 starts none) and the range
// its second byte must fall in.
std::size_t sequence_length(unsigned char b0, unsigned char& lo, unsigned char& hi) {
  lo = 0x80;
  hi = 0xBF;
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) return 2;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
    return 3;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
    return 4;
  }
  return 0;
}

}  // namespace

std::string Utf8Stream::push(std::string_view bytes) {
  kept_.append(bytes);
  std::string out;
  std::size_t i = 0;
  while (i < kept_.size()) {
    unsigned char lo = 0, hi = 0;
    const std::size_t len = sequence_length(static_cast<unsigned char>(kept_[i]), lo, hi);
    // How many of its bytes are here and right.
    std::size_t good = len == 0 ? 0 : 1;
    while (good > 0 && good < len && i + good < kept_.size()) {
      const auto b = static_cast<unsigned char>(kept_[i + good]);
      if (good == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) break;
      ++good;
    }
    if (len > 0 && good == len) {
      out.append(kept_, i, len);
      i += len;
    } else if (len > 0 && i + good == kept_.size()) {
      break;  // right so far, cut by the end: kept for the next push
    } else {
      out += kReplacement;
      i += 1;
    }
  }
  kept_.erase(0, i);
  return out;
}

std::string Utf8Stream::flush() {
  std::string out = kept_.empty() ? std::string() : std::string(kReplacement);
  kept_.clear();
  return out;
}

}  // namespace latte::cli
