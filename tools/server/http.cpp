// The HTTP routes (http.h): OpenAI's endpoints, /tokenize, /detokenize,
// /health, /metrics and the chat page, over cpp-httplib.
#include "tools/server/http.h"

#include <httplib.h>

#include <chrono>
#include <random>

#include "tools/server/page.h"

namespace latte::server {

namespace {

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump(error_json(e)), "application/json");
}

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}() ^
                                          static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())};
  static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += digits[rng() % 36];
  return id;
}

// The shared state of one streamed reply, across the provider's calls.
struct SseState {
  std::shared_ptr<Stream> stream;
  std::string id;
  bool chat = true;
  bool include_usage = false;
  bool first = true;
  std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();
};
// A stream silent this long (its prompt still prefilling, or queued) gets
// an SSE comment: a client that left is then noticed by the failed write,
// and its request cancelled, without waiting for its first token.
constexpr auto kKeepAlive = std::chrono::seconds(1);

class Routes {
 public:
  Routes(const ServedModel& m, Scheduler& s, Metrics& metrics) : m_(m), sched_(s), metrics_(metrics) {}

  void generate(const httplib::Request& req, httplib::Response& res, bool chat) {
    const json body = parse_body(req.body);
    ParsedRequest pr = chat ? parse_chat(body, m_) : parse_completion(body, m_);
    std::shared_ptr<Stream> stream = sched_.submit(std::move(pr.gen));
    if (!stream) {
      ++metrics_.requests_rejected;
      throw ApiError(503, "the server is busy: every slot is generating and the queue is full; retry later",
                     "server_error", "", "server_busy");
    }
    const std::string id = random_id(chat ? "chatcmpl-" : "cmpl-");
    if (!pr.stream) {
      std::string text;
      while (!stream->wait(&text, std::chrono::milliseconds(1000))) {
      }
      const GenResult r = stream->result();
      if (r.finish_reason == "error") throw ApiError(500, "generation failed: " + r.error, "server_error");
      res.set_content(dump(full_response(chat, id, m_, text, r)), "application/json");
      return;
    }
    auto st = std::make_shared<SseState>();
    st->stream = stream;
    st->id = id;
    st->chat = chat;
    st->include_usage = pr.include_usage;
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, st](std::size_t, httplib::DataSink& sink) {
          const auto event = [&](const json& j) {
            const std::string line = "data: " + dump(j) + "\n\n";
            st->last_write = std::chrono::steady_clock::now();
            return sink.write(line.data(), line.size());
          };
          std::string delta;
          const bool done = st->stream->wait(&delta, std::chrono::milliseconds(200));
          if (!done && delta.empty() && std::chrono::steady_clock::now() - st->last_write >= kKeepAlive) {
            static const char kComment[] = ": keep-alive\n\n";
            st->last_write = std::chrono::steady_clock::now();
            return sink.write(kComment, sizeof kComment - 1);  // false: the client left (the releaser cancels)
          }
          // A chat stream opens with the assistant's role, as OpenAI's does.
          if (st->first && st->chat) {
            st->first = false;
            if (!event(chunk_json(true, st->id, m_, "", "", true, st->include_usage))) return false;
          }
          if (!delta.empty() && !event(chunk_json(st->chat, st->id, m_, delta, "", false, st->include_usage)))
            return false;  // the client went away: the releaser cancels
          if (!done) return true;
          const GenResult r = st->stream->result();
          if (r.finish_reason == "error") {
            event(error_json(ApiError(500, "generation failed: " + r.error, "server_error")));
          } else {
            if (!event(chunk_json(st->chat, st->id, m_, "", r.finish_reason, false, st->include_usage))) return false;
            if (st->include_usage && !event(usage_chunk_json(st->chat, st->id, m_, r))) return false;
          }
          static const char kDone[] = "data: [DONE]\n\n";
          sink.write(kDone, sizeof kDone - 1);
          sink.done();
          return true;
        },
        [st](bool success) {
          if (!success) st->stream->cancel();
        });
  }

  void tokenize(const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req.body);
    if (!body.contains("content") || !body.at("content").is_string())
      throw ApiError(400, "'content' is required: a string", "invalid_request_error", "content");
    bool add_special = false;
    if (body.contains("add_special") && !body.at("add_special").is_null()) {
      if (!body.at("add_special").is_boolean())
        throw ApiError(400, "'add_special' must be true or false", "invalid_request_error", "add_special");
      add_special = body.at("add_special").get<bool>();
    }
    const auto tokens = m_.model->tokenize(body.at("content").get<std::string>(), add_special ? -1 : 0, false);
    res.set_content(dump(json{{"tokens", tokens}}), "application/json");
  }

  void detokenize(const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req.body);
    if (!body.contains("tokens") || !body.at("tokens").is_array())
      throw ApiError(400, "'tokens' is required: an array of token ids", "invalid_request_error", "tokens");
    const json& t = body.at("tokens");
    if (t.size() > kMaxTokenIds) throw ApiError(400, "too many tokens", "invalid_request_error", "tokens");
    std::vector<std::int32_t> ids;
    for (const json& x : t) {
      if (!x.is_number_integer() || x.get<std::int64_t>() < 0 || x.get<std::int64_t>() >= m_.model->n_vocab())
        throw ApiError(400, "'tokens' must be integers in [0, " + std::to_string(m_.model->n_vocab()) + ")",
                       "invalid_request_error", "tokens");
      ids.push_back(x.get<std::int32_t>());
    }
    res.set_content(dump(json{{"content", m_.model->detokenize(ids, false)}}), "application/json");
  }

  json model_json() const {
    return {{"id", m_.id}, {"object", "model"}, {"created", m_.created}, {"owned_by", "latte"},
            {"meta", {{"n_ctx", m_.n_ctx}, {"n_vocab", m_.model->n_vocab()}, {"architecture", m_.model->architecture()},
                      {"chat_format", m_.chat_format}, {"slots", sched_.parallel()},
                      {"bos_token_id", m_.model->bos()}, {"eos_token_id", m_.model->eos()}}}};
  }

 private:
  const ServedModel& m_;
  Scheduler& sched_;
  Metrics& metrics_;
};

// Wraps a handler: ApiErrors and anything else thrown become error objects.
template <class F>
httplib::Server::Handler guarded(F f) {
  return [f](const httplib::Request& req, httplib::Response& res) {
    try {
      f(req, res);
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const std::exception& e) {
      send_error(res, ApiError(500, e.what(), "server_error"));
    }
  };
}

}  // namespace

bool equal_constant_time(const std::string& a, const std::string& b) {
  // Compares every byte of the longer one whatever differs first.
  const std::size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

std::unique_ptr<httplib::Server> make_http_server(const ServedModel& model, Scheduler& scheduler, Metrics& metrics,
                                                  const HttpOptions& options) {
  auto svr = std::make_unique<httplib::Server>();
  auto routes = std::make_shared<Routes>(model, scheduler, metrics);
  const int threads = options.threads;
  svr->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<std::size_t>(threads)); };
  svr->set_payload_max_length(options.max_body);
  svr->set_read_timeout(30, 0);
  svr->set_write_timeout(30, 0);
  svr->set_keep_alive_timeout(5);

  // Every endpoint but /health (and the page, which holds no data: its
  // requests carry the key) needs the key, compared in constant time.
  const std::string key = options.api_key;
  svr->set_pre_routing_handler([key](const httplib::Request& req, httplib::Response& res) {
    if (key.empty() || req.path == "/health" || (req.path == "/" && req.method == "GET"))
      return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    const std::string given = auth.rfind("Bearer ", 0) == 0 ? auth.substr(7) : std::string();
    if (equal_constant_time(given, key)) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, ApiError(401, "Incorrect or missing API key: send 'Authorization: Bearer KEY'",
                             "invalid_request_error", "", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Errors httplib answers itself (no route: 404; body too large: 413) get
  // an error object too.
  svr->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413)
      send_error(res, ApiError(413, "the request body is larger than the server's limit (--max-body)",
                               "invalid_request_error", "", "request_too_large"));
    else if (res.status == 404)
      send_error(res, ApiError(404, "no route " + req.method + " " + req.path, "invalid_request_error", "", "not_found"));
    else
      send_error(res, ApiError(res.status, "HTTP error " + std::to_string(res.status), "invalid_request_error"));
  });
  svr->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, what, "server_error"));
  });
  svr->set_logger([&metrics](const httplib::Request&, const httplib::Response& res) {
    ++metrics.requests_total;
    if (res.status >= 400) ++metrics.requests_errors;
  });

  svr->Post("/v1/chat/completions", guarded([routes](const auto& req, auto& res) { routes->generate(req, res, true); }));
  svr->Post("/v1/completions", guarded([routes](const auto& req, auto& res) { routes->generate(req, res, false); }));
  svr->Post("/tokenize", guarded([routes](const auto& req, auto& res) { routes->tokenize(req, res); }));
  svr->Post("/detokenize", guarded([routes](const auto& req, auto& res) { routes->detokenize(req, res); }));
  svr->Get("/v1/models", guarded([routes](const auto&, auto& res) {
    res.set_content(dump(json{{"object", "list"}, {"data", json::array({routes->model_json()})}}), "application/json");
  }));
  svr->Get(R"(/v1/models/(.+))", guarded([routes, &model](const auto& req, auto& res) {
    if (req.matches[1] != model.id)
      throw ApiError(404, "The model '" + std::string(req.matches[1]) + "' does not exist", "invalid_request_error",
                     "model", "model_not_found");
    res.set_content(dump(routes->model_json()), "application/json");
  }));
  svr->Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"status\":\"ok\"}", "application/json");
  });
  svr->Get("/metrics", [&metrics](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.prometheus(), "text/plain; version=0.0.4");
  });
  svr->Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(kPageHtml, kPageHtmlSize), "text/html; charset=utf-8");
  });
  return svr;
}

}  // namespace latte::server
