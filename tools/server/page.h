// The chat page served at `/`: tools/server/page/index.html, turned into a
// C++ source at build time (cmake/embed_text.cmake), so the binary needs no
// file beside it and the page needs no network.
#pragma once

#include <cstddef>

namespace latte::server {
extern const char kPageHtml[];
extern const std::size_t kPageHtmlSize;
}  // namespace latte::server
