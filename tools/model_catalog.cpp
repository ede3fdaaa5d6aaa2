#include "tools/model_catalog.h"

namespace latte {

namespace {
constexpr KnownMlaModel kModels[] = {
    //  name               d     L   n_h  q_lora kv   nope rope v    max ctx
    {"DeepSeek-V2-Lite", 2048, 27, 16, 0, 512, 128, 64, 128, 163840},
    {"DeepSeek-V2", 5120, 60, 128, 1536, 512, 128, 64, 128, 163840},
    {"DeepSeek-V3", 7168, 61, 128, 1536, 512, 128, 64, 128, 163840},
    {"MiniCPM3-4B", 2560, 62, 40, 768, 256, 64, 32, 64, 0},
    {"PLM-1.8B", 2048, 32, 16, 0, 512, 128, 64, 128, 0},
};
}  // namespace

std::span<const KnownMlaModel> known_mla_models() { return kModels; }

}  // namespace latte
