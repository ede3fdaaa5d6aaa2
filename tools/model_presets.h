// The shapes `latte make-model --preset NAME` writes: real models' attention,
// feed-forward and RoPE as their Hugging Face configs give them and
// llama.cpp's converters lay them out in GGUF, with random weights.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "tools/random_model.h"

namespace latte {

struct ModelPreset {
  const char* name;  // what --preset takes
  const char* what;  // one line for --help
};

// Every preset, in the order --help lists them.
std::span<const ModelPreset> model_presets();

// "v2-lite, v2-lite-moe, ..." for the messages that list them.
std::string model_preset_names();

// Preset `name`'s spec at the real model's layer count and vocabulary (the
// caller sets its own), F32 weights and seed 1; nullopt for an unknown name.
std::optional<RandomModelSpec> model_preset_spec(std::string_view name);

}  // namespace latte
