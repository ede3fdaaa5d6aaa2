// A reply's text as it is generated: finds stop strings and holds back what
// may not be sent yet (a tail that could begin a stop string, an
// unfinished UTF-8 character). Rules: pure text logic, no model, no
// threads; what it releases is never taken back.
#pragma once

#include <string>
#include <vector>

namespace latte::server {

class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stop) : stop_(std::move(stop)) {}
  // Adds a token's bytes. Returns true when a stop string now appears: the
  // text is cut before it and nothing more should be added.
  bool add(const std::string& piece);
  // The text that may be sent now and was not sent before.
  std::string release();
  // The rest, at the end of the reply.
  std::string flush();
  const std::string& text() const { return text_; }

 private:
  std::vector<std::string> stop_;
  std::string text_;
  std::size_t sent_ = 0;
  bool stopped_ = false;
};

// Whether s is well-formed UTF-8 (no overlongs, surrogates or values past U+10FFFF).
bool valid_utf8(const std::string& s);
// The length of s less an incomplete UTF-8 character at its end.
std::size_t complete_utf8_prefix(const std::string& s);

}  // namespace latte::server
