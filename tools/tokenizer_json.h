// A Hugging Face tokenizer.json (byte-level BPE) as a VocabSpec, for
// random-weight models that carry a real vocabulary (`latte make-model
// --tokenizer-json`): the grammar tests and benchmarks need a real 100K+
// vocabulary without a real model's weights. Reads model.vocab,
// model.merges (either "a b" strings or [a, b] pairs) and added_tokens
// (special: control, else user-defined); ids the file leaves unused are
// filled with unused tokens. Error(invalid_argument / io_error) naming what
// is wrong.
#pragma once

#include <string>

#include "runtime/tokenizer/tokenizer.h"

namespace latte {

// pre: the GGUF pre-tokenizer name ("deepseek-v3"); pad_to: at least this
// many tokens (0: as many as the file has).
VocabSpec read_tokenizer_json(const std::string& path, const std::string& pre, int pad_to = 0);

}  // namespace latte
