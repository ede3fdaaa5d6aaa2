// The tokenizer description in a GGUF file's metadata (tokenizer.ggml.*).
#pragma once

#include "runtime/tokenizer/tokenizer.h"

namespace latte {

class GgufFile;

// True if the file carries a tokenizer (tokenizer.ggml.model and tokens).
bool gguf_has_vocab(const GgufFile& f);
// Reads the keys (see runtime/tokenizer/tokenizer.h for the mapping), with
// llama.cpp's defaults for absent ones. bad_file naming the key on a wrong type.
VocabSpec vocab_from_gguf(const GgufFile& f);

}  // namespace latte
