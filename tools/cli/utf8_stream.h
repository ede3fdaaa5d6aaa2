// Streamed token text as the terminal should get it: only whole, valid UTF-8
// (a character can span tokens; a token can hold bytes that are not UTF-8).
#pragma once

#include <string>
#include <string_view>

namespace latte::cli {

class Utf8Stream {
 public:
  // The complete characters so far: an unfinished one at the end is kept
  // for the next push, a byte that cannot start or continue one comes out
  // as U+FFFD.
  std::string push(std::string_view bytes);
  // What is still kept, as one U+FFFD (nothing if nothing is); empties it.
  std::string flush();

 private:
  std::string kept_;
};

}  // namespace latte::cli
