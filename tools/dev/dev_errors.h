// The developer commands' boundary: the engine's latte::Error leaves them as
// the API's api::Exception (status and message kept), so the CLI handles one
// kind of error.
#pragma once

#include "latte/latte.hpp"
#include "runtime/error.h"

namespace latte::cli {

template <class F>
int as_api_errors(F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    throw api::Exception(static_cast<latte_status>(e.status()), e.what());
  }
}

}  // namespace latte::cli
