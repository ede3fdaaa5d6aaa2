// OpenAI's request and response shapes: parses and validates request bodies
// into GenRequests (every field typed and bounded, so no input reaches the
// scheduler that could crash it or grow memory without bound) and writes
// the responses, stream chunks and error objects. Rules: no HTTP and no
// threads here; every refusal is an ApiError with OpenAI's error fields.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "latte/latte.hpp"
#include "tools/server/scheduler.h"

namespace latte::server {

using json = nlohmann::json;

// A request refused: HTTP status and OpenAI's {"error": {...}} fields.
struct ApiError : std::runtime_error {
  int status;
  std::string type, param, code;
  ApiError(int status_, const std::string& message, std::string type_ = "invalid_request_error",
           std::string param_ = "", std::string code_ = "")
      : std::runtime_error(message), status(status_), type(std::move(type_)), param(std::move(param_)),
        code(std::move(code_)) {}
};
// {"error": {"message", "type", "param", "code"}} (param and code null when empty).
json error_json(const ApiError& e);

// Bounds on what one request may ask for.
inline constexpr std::size_t kMaxMessages = 1024;
inline constexpr std::size_t kMaxStops = 16;
inline constexpr std::size_t kMaxStopBytes = 256;
inline constexpr std::size_t kMaxLogitBias = 1024;
inline constexpr std::size_t kMaxTokenIds = std::size_t{1} << 20;  // /detokenize, token prompts

// What the protocol needs of the model being served.
struct ServedModel {
  const api::Model* model = nullptr;
  std::string id;           // its name in the API
  std::string chat_format;  // the model's ("chatml" where its template is none Latte knows)
  bool chat_bos = false;    // whether a conversation in that format opens with BOS
  std::int64_t n_ctx = 0;   // per slot
  std::int64_t created = 0; // seconds since the epoch: when the server started
};

struct ParsedRequest {
  GenRequest gen;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

// The body as JSON: 400 for malformed JSON or invalid UTF-8, or anything but an object.
json parse_body(const std::string& body);
// POST /v1/chat/completions and POST /v1/completions.
ParsedRequest parse_chat(const json& body, const ServedModel& m);
ParsedRequest parse_completion(const json& body, const ServedModel& m);

// Responses. kind: "chat" or "text". id: "chatcmpl-..." / "cmpl-...".
json usage_json(const GenResult& r);
json full_response(bool chat, const std::string& id, const ServedModel& m, const std::string& text, const GenResult& r);
// One stream chunk: text (may be empty), finish_reason ("" for none), the
// assistant role on a chat's first chunk.
json chunk_json(bool chat, const std::string& id, const ServedModel& m, const std::string& text,
                const std::string& finish_reason, bool first, bool usage_null);
json usage_chunk_json(bool chat, const std::string& id, const ServedModel& m, const GenResult& r);
// JSON text with invalid UTF-8 (a token cut a character) replaced, never thrown on.
std::string dump(const json& j);

}  // namespace latte::server
