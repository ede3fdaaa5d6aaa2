// OpenAI request parsing and validation, response shapes (protocol.h).
#include "tools/server/protocol.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <random>

#include "tools/server/text_stream.h"

namespace latte::server {

namespace {

[[noreturn]] void bad(const std::string& param, const std::string& message, const std::string& code = "") {
  throw ApiError(400, message, "invalid_request_error", param, code);
}

// A field that is absent or null.
bool absent(const json& body, const char* key) {
  const auto it = body.find(key);
  return it == body.end() || it->is_null();
}

double number_in(const json& body, const char* key, double lo, double hi, double fallback) {
  if (absent(body, key)) return fallback;
  const json& v = body.at(key);
  if (!v.is_number()) bad(key, std::string("'") + key + "' must be a number");
  const double d = v.get<double>();
  if (!(d >= lo && d <= hi))
    bad(key, std::string("'") + key + "' is " + v.dump() + ", outside [" + json(lo).dump() + ", " + json(hi).dump() + "]");
  return d;
}

std::int64_t integer_in(const json& body, const char* key, std::int64_t lo, std::int64_t hi, std::int64_t fallback) {
  if (absent(body, key)) return fallback;
  const json& v = body.at(key);
  if (!v.is_number_integer()) bad(key, std::string("'") + key + "' must be an integer");
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
    bad(key, std::string("'") + key + "' is " + v.dump() + ", more than " + std::to_string(hi));
  const std::int64_t n = v.get<std::int64_t>();
  if (n < lo || n > hi)
    bad(key, std::string("'") + key + "' is " + v.dump() + ", outside [" + std::to_string(lo) + ", " +
                 std::to_string(hi) + "]");
  return n;
}

bool boolean(const json& body, const char* key, bool fallback) {
  if (absent(body, key)) return fallback;
  const json& v = body.at(key);
  if (!v.is_boolean()) bad(key, std::string("'") + key + "' must be true or false");
  return v.get<bool>();
}

std::uint64_t random_seed() {
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^
         static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

// The fields chat and completions share: model, n, stream, sampling,
// stop, logit_bias, penalties.
void parse_common(const json& body, const ServedModel& m, ParsedRequest& out, std::int64_t default_max_tokens) {
  // OpenAI requires 'model'; a server of one model takes its absence as
  // that model (as llama-server does), so a bare curl works.
  if (!absent(body, "model") && !body.at("model").is_string()) bad("model", "'model' must be a string");
  const std::string model = absent(body, "model") ? m.id : body.at("model").get<std::string>();
  if (model != m.id)
    throw ApiError(404, "The model '" + model + "' does not exist (this server serves '" + m.id + "')",
                   "invalid_request_error", "model", "model_not_found");
  if (integer_in(body, "n", 1, 1, 1) != 1) bad("n", "only n = 1 is supported");
  if (!absent(body, "best_of") && integer_in(body, "best_of", 1, 1, 1) != 1) bad("best_of", "only best_of = 1 is supported");
  out.stream = boolean(body, "stream", false);
  if (!absent(body, "stream_options")) {
    const json& so = body.at("stream_options");
    if (!so.is_object()) bad("stream_options", "'stream_options' must be an object");
    if (!out.stream) bad("stream_options", "'stream_options' is only allowed with 'stream': true");
    out.include_usage = boolean(so, "include_usage", false);
  }
  // Token budget: max_completion_tokens (chat's newer name) over max_tokens,
  // capped at the context (a reply beyond it goes on through context shifts).
  std::int64_t max_tokens = default_max_tokens;
  for (const char* key : {"max_tokens", "max_completion_tokens"})
    if (!absent(body, key)) max_tokens = integer_in(body, key, 1, std::numeric_limits<std::int32_t>::max(), 0);
  out.gen.max_tokens = std::min(max_tokens, m.n_ctx);

  latte_sampler_options& s = out.gen.sampling;
  s = latte_sampler_default_options();
  s.temperature = static_cast<float>(number_in(body, "temperature", 0, 2, 1));
  s.top_p = static_cast<float>(number_in(body, "top_p", 0, 1, 1));
  if (s.top_p <= 0) bad("top_p", "'top_p' must be more than 0");
  s.top_k = 0;     // OpenAI's sampling has no top-k or min-p
  s.min_p = 0;
  s.repeat_penalty = 1;
  if (absent(body, "seed")) {
    s.seed = random_seed();
  } else {
    const json& v = body.at("seed");
    if (!v.is_number_integer()) bad("seed", "'seed' must be an integer");
    s.seed = v.is_number_unsigned() ? v.get<std::uint64_t>() : static_cast<std::uint64_t>(v.get<std::int64_t>());
  }
  for (const char* key : {"presence_penalty", "frequency_penalty"})
    if (number_in(body, key, -2, 2, 0) != 0) bad(key, std::string("'") + key + "' is not supported (only 0)");
  if (!absent(body, "logprobs")) {
    const json& v = body.at("logprobs");
    if (!(v.is_boolean() && !v.get<bool>())) bad("logprobs", "'logprobs' is not supported");
  }
  if (!absent(body, "top_logprobs")) bad("top_logprobs", "'top_logprobs' is not supported");
  if (!absent(body, "tools") && !(body.at("tools").is_array() && body.at("tools").empty()))
    bad("tools", "'tools' (function calling) is not supported");

  if (!absent(body, "stop")) {
    const json& v = body.at("stop");
    std::vector<std::string> stops;
    if (v.is_string()) {
      stops.push_back(v.get<std::string>());
    } else if (v.is_array()) {
      if (v.size() > kMaxStops) bad("stop", "'stop' has more than " + std::to_string(kMaxStops) + " strings");
      for (const json& x : v) {
        if (!x.is_string()) bad("stop", "'stop' must be a string or an array of strings");
        stops.push_back(x.get<std::string>());
      }
    } else {
      bad("stop", "'stop' must be a string or an array of strings");
    }
    for (const std::string& x : stops) {
      if (x.empty()) bad("stop", "'stop' strings must not be empty");
      if (x.size() > kMaxStopBytes) bad("stop", "a 'stop' string is longer than " + std::to_string(kMaxStopBytes) + " bytes");
    }
    out.gen.stop = std::move(stops);
  }

  if (!absent(body, "logit_bias")) {
    const json& v = body.at("logit_bias");
    if (!v.is_object()) bad("logit_bias", "'logit_bias' must be an object of token ids to numbers");
    if (v.size() > kMaxLogitBias) bad("logit_bias", "'logit_bias' has more than " + std::to_string(kMaxLogitBias) + " entries");
    const std::int32_t n_vocab = m.model->n_vocab();
    for (auto it = v.begin(); it != v.end(); ++it) {
      const std::string& key = it.key();
      if (key.empty() || key.size() > 10 || key.find_first_not_of("0123456789") != std::string::npos)
        bad("logit_bias", "'logit_bias' key '" + key + "' is not a token id");
      const long long id = std::stoll(key);
      if (id >= n_vocab) bad("logit_bias", "'logit_bias' token " + key + " is outside the vocabulary of " + std::to_string(n_vocab));
      if (!it.value().is_number()) bad("logit_bias", "'logit_bias' values must be numbers");
      const double b = it.value().get<double>();
      if (!(b >= -100 && b <= 100)) bad("logit_bias", "'logit_bias' values must be in [-100, 100]");
      // -100 bans the token, as OpenAI documents it.
      out.gen.logit_bias.push_back({static_cast<std::int32_t>(id), b <= -100 ? -INFINITY : static_cast<float>(b)});
    }
  }

  // ---- Structured output: response_format (OpenAI's json_object and
  // json_schema), or `grammar` (GBNF, as llama-server takes it). ----
  if (!absent(body, "response_format")) {
    const json& v = body.at("response_format");
    if (!v.is_object() || !v.contains("type") || !v.at("type").is_string())
      bad("response_format", "'response_format' must be an object with a string 'type'");
    const std::string type = v.at("type").get<std::string>();
    if (type == "json_object") {
      out.gen.json_schema = "{\"type\":\"object\"}";
    } else if (type == "json_schema") {
      const auto js = v.find("json_schema");
      if (js == v.end() || !js->is_object())
        bad("response_format", "response_format 'json_schema' needs a 'json_schema' object ({\"name\": ..., \"schema\": {...}})");
      const auto schema = js->find("schema");
      if (schema != js->end() && !schema->is_object() && !schema->is_boolean())
        bad("response_format", "'response_format.json_schema.schema' must be a JSON Schema object");
      // Without a schema the reply is any JSON object, as with json_object.
      out.gen.json_schema = schema == js->end() ? "{\"type\":\"object\"}" : schema->dump();
    } else if (type != "text") {
      bad("response_format", "'response_format' type '" + type + "' is unknown (text, json_object or json_schema)");
    }
  }
  if (!absent(body, "grammar")) {
    if (!body.at("grammar").is_string()) bad("grammar", "'grammar' must be a string (a GBNF grammar)");
    if (!out.gen.json_schema.empty()) bad("grammar", "give 'grammar' or a JSON 'response_format', not both");
    out.gen.grammar = body.at("grammar").get<std::string>();
    if (out.gen.grammar.empty()) bad("grammar", "'grammar' is empty");
  }
  // Checked here, so a schema or grammar Latte refuses is a 400 naming what
  // is wrong (the keyword, the line and column), not a failed generation.
  if (!out.gen.json_schema.empty() || !out.gen.grammar.empty()) {
    const bool schema = !out.gen.json_schema.empty();
    try {
      api::Sampler probe(latte_sampler_default_options());
      if (schema) probe.set_json_schema(*m.model, out.gen.json_schema);
      else probe.set_grammar(*m.model, out.gen.grammar);
    } catch (const api::Exception& e) {
      bad(schema ? "response_format" : "grammar", e.what(), schema ? "invalid_json_schema" : "invalid_grammar");
    }
  }
}

// A message's content: a string, null, or an array of text parts.
std::string content_text(const json& msg, std::size_t index) {
  const std::string param = "messages[" + std::to_string(index) + "].content";
  const auto it = msg.find("content");
  if (it == msg.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) bad(param, "'" + param + "' must be a string or an array of text parts");
  std::string text;
  for (const json& part : *it) {
    if (!part.is_object() || !part.contains("type") || part.at("type") != "text" || !part.contains("text") ||
        !part.at("text").is_string())
      bad(param, "'" + param + "' parts must be {\"type\": \"text\", \"text\": ...} (only text is supported)");
    text += part.at("text").get<std::string>();
  }
  return text;
}

std::vector<std::int32_t> chat_tokens(const ServedModel& m, const std::vector<api::Model::ChatMessage>& msgs) {
  return m.model->chat_tokenize(msgs, /*add_generation_prompt=*/true, m.chat_bos ? 1 : 0, m.chat_format);
}

}  // namespace

json error_json(const ApiError& e) {
  return {{"error",
           {{"message", e.what()},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

json parse_body(const std::string& body) {
  if (!valid_utf8(body)) bad("", "the request body is not valid UTF-8");
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) bad("", "the request body is not valid JSON");
  if (!j.is_object()) bad("", "the request body must be a JSON object");
  return j;
}

ParsedRequest parse_chat(const json& body, const ServedModel& m) {
  ParsedRequest out;
  parse_common(body, m, out, m.n_ctx);
  if (absent(body, "messages") || !body.at("messages").is_array())
    bad("messages", "'messages' is required: an array of {role, content}");
  const json& messages = body.at("messages");
  if (messages.empty()) bad("messages", "'messages' is empty");
  if (messages.size() > kMaxMessages) bad("messages", "'messages' has more than " + std::to_string(kMaxMessages) + " messages");
  std::vector<api::Model::ChatMessage> msgs;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const json& msg = messages[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object() || !msg.contains("role") || !msg.at("role").is_string())
      bad(param, "'" + param + "' must be an object with a string 'role'");
    std::string role = msg.at("role").get<std::string>();
    if (role == "developer") role = "system";  // OpenAI's newer name for it
    if (role != "system" && role != "user" && role != "assistant")
      bad(param + ".role", "'" + param + ".role' is '" + role + "': system, developer, user or assistant are supported");
    msgs.push_back({role, content_text(msg, i)});
  }
  // The conversation's tokens; where it outgrew the context, its oldest
  // turns after the system ones are left out until it fits with room for
  // the reply (up to a quarter of the context), as a shift would have.
  std::size_t first = 0;
  while (first < msgs.size() && msgs[first].role == "system") ++first;
  const std::int64_t room = std::min<std::int64_t>(out.gen.max_tokens, m.n_ctx / 4);
  std::vector<std::int32_t> tokens = chat_tokens(m, msgs);
  while (static_cast<std::int64_t>(tokens.size()) > m.n_ctx - room && msgs.size() - first > 1) {
    msgs.erase(msgs.begin() + static_cast<std::ptrdiff_t>(first));
    tokens = chat_tokens(m, msgs);
  }
  if (static_cast<std::int64_t>(tokens.size()) >= m.n_ctx)
    bad("messages", "the last message takes " + std::to_string(tokens.size()) + " tokens; the context holds " +
                        std::to_string(m.n_ctx), "context_length_exceeded");
  out.gen.prompt = std::move(tokens);
  // A shift keeps the system turns (and BOS).
  std::vector<api::Model::ChatMessage> system(msgs.begin(), msgs.begin() + static_cast<std::ptrdiff_t>(first));
  out.gen.n_keep = system.empty()
                       ? (m.chat_bos ? 1 : 0)
                       : static_cast<std::int64_t>(
                             m.model->chat_tokenize(system, false, m.chat_bos ? 1 : 0, m.chat_format).size());
  return out;
}

ParsedRequest parse_completion(const json& body, const ServedModel& m) {
  ParsedRequest out;
  parse_common(body, m, out, 16);  // OpenAI's default for completions
  if (!absent(body, "suffix")) bad("suffix", "'suffix' is not supported");
  if (boolean(body, "echo", false)) bad("echo", "'echo' is not supported");
  if (absent(body, "prompt")) bad("prompt", "'prompt' is required");
  const json& p = body.at("prompt");
  const bool adds_bos = m.model->bos() >= 0 && !m.model->tokenize("", -1).empty();
  if (p.is_string()) {
    out.gen.prompt = m.model->tokenize(p.get<std::string>(), -1, /*parse_special=*/false);
  } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
    out.gen.prompt = m.model->tokenize(p[0].get<std::string>(), -1, false);
  } else if (p.is_array() && !p.empty() && p.size() <= kMaxTokenIds && p[0].is_number_integer()) {
    for (const json& t : p) {
      if (!t.is_number_integer() || t.get<std::int64_t>() < 0 || t.get<std::int64_t>() >= m.model->n_vocab())
        bad("prompt", "'prompt' token ids must be integers in [0, " + std::to_string(m.model->n_vocab()) + ")");
      out.gen.prompt.push_back(t.get<std::int32_t>());
    }
  } else {
    bad("prompt", "'prompt' must be a string, an array of one string, or an array of token ids");
  }
  if (out.gen.prompt.empty()) bad("prompt", "'prompt' is empty (the model adds no BOS to start from)");
  if (static_cast<std::int64_t>(out.gen.prompt.size()) >= m.n_ctx)
    bad("prompt", "the prompt takes " + std::to_string(out.gen.prompt.size()) + " tokens; the context holds " +
                      std::to_string(m.n_ctx), "context_length_exceeded");
  out.gen.n_keep = adds_bos ? 1 : 0;
  return out;
}

json usage_json(const GenResult& r) {
  return {{"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", r.completion_tokens},
          {"total_tokens", r.prompt_tokens + r.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens}}}};
}

namespace {
json envelope(bool chat, bool chunk, const std::string& id, const ServedModel& m) {
  const char* object = chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  const std::int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  return {{"id", id}, {"object", object}, {"created", now}, {"model", m.id}, {"system_fingerprint", "latte"}};
}
json reason(const std::string& r) { return r.empty() ? json(nullptr) : json(r); }
}  // namespace

json full_response(bool chat, const std::string& id, const ServedModel& m, const std::string& text, const GenResult& r) {
  json j = envelope(chat, false, id, m);
  json choice = {{"index", 0}, {"finish_reason", reason(r.finish_reason)}, {"logprobs", nullptr}};
  if (chat) choice["message"] = {{"role", "assistant"}, {"content", text}};
  else choice["text"] = text;
  j["choices"] = json::array({choice});
  j["usage"] = usage_json(r);
  return j;
}

json chunk_json(bool chat, const std::string& id, const ServedModel& m, const std::string& text,
                const std::string& finish_reason, bool first, bool usage_null) {
  json j = envelope(chat, true, id, m);
  json choice = {{"index", 0}, {"finish_reason", reason(finish_reason)}, {"logprobs", nullptr}};
  if (chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || (first && finish_reason.empty())) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  j["choices"] = json::array({choice});
  if (usage_null) j["usage"] = nullptr;
  return j;
}

json usage_chunk_json(bool chat, const std::string& id, const ServedModel& m, const GenResult& r) {
  json j = envelope(chat, true, id, m);
  j["choices"] = json::array();
  j["usage"] = usage_json(r);
  return j;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace latte::server
