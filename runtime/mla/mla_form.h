// The two forms of MLA attention (mla-spec.md 1): naive decompresses per-head
// keys and values from the cached latents; absorbed folds W_UK and W_UV into
// the query and the output and attends over the latents directly.
#pragma once

namespace latte {

enum class MlaForm { naive, absorbed };

inline const char* mla_form_name(MlaForm f) { return f == MlaForm::naive ? "naive" : "absorbed"; }

}  // namespace latte
