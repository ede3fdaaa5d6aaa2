// `latte serve` (serve.h): loads the model, starts the scheduler and the
// HTTP server, and stops both cleanly on SIGINT or SIGTERM. Rules: the
// only place that owns process-wide state (signals, the port file).
#include "tools/server/serve.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "latte/latte.hpp"
#include "tools/server/http.h"
#include "tools/server/metrics.h"
#include "tools/server/protocol.h"
#include "tools/server/scheduler.h"

namespace latte::server {

namespace {

volatile std::sig_atomic_t g_signal = 0;
extern "C" void on_signal(int sig) { g_signal = sig; }

latte_cache_type cache_type(const std::string& name) {
  if (name == "f32") return LATTE_CACHE_F32;
  if (name == "f16") return LATTE_CACHE_F16;
  if (name == "int4") return LATTE_CACHE_INT4;
  return LATTE_CACHE_INT8;
}

}  // namespace

int run_serve(const ServeOptions& o) {
  latte_model_options mo = latte_model_default_options();
  mo.use_mmap = o.no_mmap ? 0 : o.mmap ? 1 : -1;
  const api::Model model(o.model, mo);
  if (!model.has_tokenizer())
    throw api::Exception(LATTE_ERR_UNSUPPORTED, "'" + o.model + "' has no tokenizer: the server needs text");

  ServedModel served;
  served.model = &model;
  served.id = o.alias.empty() ? model.name() : o.alias;
  // A model whose chat template is none Latte knows is served as ChatML.
  const char* format = latte_chat_format(model.handle());
  served.chat_format = format ? format : "chatml";
  served.chat_bos = model.chat_apply({{"user", ""}}, false, served.chat_format).add_bos;
  served.created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();

  SchedulerOptions so;
  so.parallel = o.parallel;
  so.queue = o.queue;
  so.prefill_chunk = o.prefill_chunk;
  so.session.threads = o.threads;
  so.session.cache_type = cache_type(o.cache);
  so.session.prefill_chunk = o.prefill_chunk;
  const std::int64_t trained = model.n_ctx_train();
  if (o.n_ctx >= 0) so.session.n_ctx = o.n_ctx;
  else if (trained > 0) so.session.n_ctx = std::min<std::int64_t>(so.session.n_ctx, trained);
  Metrics metrics;
  Scheduler scheduler(model, so, metrics);
  served.n_ctx = scheduler.n_ctx();

  HttpOptions ho;
  ho.api_key = o.api_key;
  if (ho.api_key.empty())
    if (const char* env = std::getenv("LATTE_API_KEY")) ho.api_key = env;
  ho.max_body = o.max_body;
  ho.threads = o.parallel + o.queue + 8;  // every queued request holds a connection; /health and /metrics still answer
  auto svr = make_http_server(served, scheduler, metrics, ho);

  int port = o.port;
  if (port == 0) {
    port = svr->bind_to_any_port(o.host);
    if (port < 0) throw api::Exception(LATTE_ERR_IO, "cannot bind " + o.host + " on any port");
  } else if (!svr->bind_to_port(o.host, port)) {
    throw api::Exception(LATTE_ERR_IO, "cannot bind " + o.host + ":" + std::to_string(port) + " (in use?)");
  }
  if (!o.port_file.empty()) {
    // Written whole, then renamed: a reader never sees half a number.
    const std::string tmp = o.port_file + ".tmp";
    { std::ofstream(tmp) << port << "\n"; }
    std::remove(o.port_file.c_str());  // Windows' rename does not replace
    std::rename(tmp.c_str(), o.port_file.c_str());
  }
  std::fprintf(stderr, "latte serve: %s (%s chat format), %d slots of %lld tokens, %s cache%s\n",
               served.id.c_str(), served.chat_format.c_str(), o.parallel, static_cast<long long>(served.n_ctx),
               o.cache.c_str(), ho.api_key.empty() ? "" : ", API key required");
  std::fprintf(stderr, "latte serve: listening on http://%s:%d/\n", o.host.c_str(), port);
  std::fflush(stderr);

#ifdef SIGPIPE
  std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return, not the end of the server
#endif
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  // Signal handlers may only set a flag: this thread turns it into stop().
  std::atomic<bool> listening_done{false};
  std::thread watcher([&] {
    while (!listening_done.load() && g_signal == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (g_signal != 0) {
      scheduler.stop();
      svr->stop();
    }
  });
  svr->listen_after_bind();
  listening_done = true;
  watcher.join();
  scheduler.stop();
  const int sig = g_signal;
  if (sig != 0) std::fprintf(stderr, "latte serve: stopped by signal %d\n", sig);
  return 0;
}

}  // namespace latte::server
