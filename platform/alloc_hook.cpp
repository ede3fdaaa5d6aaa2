// The allocation-failure hook's one definition (see alloc_hook.h).
#include "platform/alloc_hook.h"

namespace latte {

std::atomic<AllocFailHook> g_alloc_fail_hook{nullptr};

}  // namespace latte
