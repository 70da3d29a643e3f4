#include "tools/sim/sim_openai_apis.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

namespace llmgate::sim {
namespace {

using json = nlohmann::ordered_json;

ApiError invalid(std::string message, std::optional<std::string> param, std::string code) {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param),
                  std::move(code)};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// The body as a JSON object with a non-empty string model, or the error.
std::variant<nlohmann::json, ApiError> object_with_model(std::string_view body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded()) {
    return invalid("We could not parse the JSON body of your request.", std::nullopt, "");
  }
  if (!j.is_object()) return invalid("The request body must be a JSON object.", std::nullopt, "");
  auto model = j.find("model");
  if (model == j.end() || !model->is_string() || model->get_ref<const std::string&>().empty()) {
    return invalid("You must provide a model parameter.", "model",
                   model == j.end() ? "missing_required_parameter" : "invalid_type");
  }
  return j;
}

// The characters of a prompt or an input: strings, and the text of arrays of
// strings or message-like objects.
std::size_t text_chars(const nlohmann::json& v) {
  if (v.is_string()) return v.get_ref<const std::string&>().size();
  std::size_t n = 0;
  if (v.is_array()) {
    for (const auto& item : v) n += text_chars(item);
  } else if (v.is_object()) {
    for (const char* key : {"content", "text"}) {
      if (auto it = v.find(key); it != v.end()) n += text_chars(*it);
    }
  } else if (v.is_number()) {
    n += 4;  // a token id
  }
  return n;
}

std::optional<ApiError> read_stream(const nlohmann::json& j, ChatRequest& r) {
  if (auto s = j.find("stream"); s != j.end() && !s->is_null()) {
    if (!s->is_boolean()) {
      return invalid("Invalid type for 'stream': expected a boolean.", "stream", "invalid_type");
    }
    r.stream = s->get<bool>();
  }
  return std::nullopt;
}

std::optional<ApiError> read_cap(const nlohmann::json& j, const char* key, ChatRequest& r) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer() || it->get<std::int64_t>() < 1) {
    return invalid(std::string("Invalid '") + key + "': expected an integer >= 1.", key,
                   "invalid_value");
  }
  r.max_tokens = it->get<std::int64_t>();
  return std::nullopt;
}

constexpr std::string_view kToolName = "lookup";

json usage_json(std::int64_t prompt, std::int64_t cached, const Answer& a) {
  return {{"input_tokens", prompt},
          {"input_tokens_details", {{"cached_tokens", cached}}},
          {"output_tokens", a.tokens},
          {"output_tokens_details", {{"reasoning_tokens", a.reasoning}}},
          {"total_tokens", prompt + a.tokens}};
}

std::string reasoning_id(std::string_view id) { return "rs_" + std::string(id.substr(5)); }
std::string message_id(std::string_view id) { return "msg_" + std::string(id.substr(5)); }
std::string call_item_id(std::string_view id) { return "fc_" + std::string(id.substr(5)); }

bool is_tool_call(const Answer& a) { return a.output == Profile::Output::kToolCall; }

// The output items of a whole answer.
json output_items(std::string_view id, const Answer& a) {
  json items = json::array();
  if (a.reasoning > 0) {
    json summary = json::array();
    if (!a.reasoning_hidden)
      summary.push_back({{"type", "summary_text"}, {"text", a.reasoning_text()}});
    items.push_back({{"id", reasoning_id(id)}, {"type", "reasoning"}, {"summary", summary}});
  }
  if (a.answer_tokens() <= 0) return items;
  if (is_tool_call(a)) {
    items.push_back({{"id", call_item_id(id)},
                     {"type", "function_call"},
                     {"status", "completed"},
                     {"arguments", a.tool_arguments()},
                     {"call_id", a.call_id},
                     {"name", kToolName}});
  } else {
    items.push_back({{"id", message_id(id)},
                     {"type", "message"},
                     {"status", "completed"},
                     {"role", "assistant"},
                     {"content", json::array({{{"type", "output_text"},
                                               {"text", a.answer_text()},
                                               {"annotations", json::array()}}})}});
  }
  return items;
}

json response_object(std::string_view id, std::int64_t created, std::string_view model,
                     std::string_view status) {
  return {{"id", id},         {"object", "response"},    {"created_at", created},
          {"status", status}, {"error", nullptr},        {"incomplete_details", nullptr},
          {"model", model},   {"output", json::array()}, {"parallel_tool_calls", true},
          {"usage", nullptr}};
}

// The whole Response once generated (completed, or incomplete when capped).
json finished_response(std::string_view id, std::int64_t created, std::string_view model,
                       const Answer& answer, bool capped, std::int64_t prompt_tokens,
                       std::int64_t cached_tokens) {
  json r = response_object(id, created, model, capped ? "incomplete" : "completed");
  if (capped) r["incomplete_details"] = {{"reason", "max_output_tokens"}};
  r["output"] = output_items(id, answer);
  r["usage"] = usage_json(prompt_tokens, cached_tokens, answer);
  return r;
}

// FNV-1a: the seed of an input's vector.
std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string base64(const unsigned char* data, std::size_t n) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (std::size_t i = 0; i < n; i += 3) {
    const unsigned v = (unsigned{data[i]} << 16) | (i + 1 < n ? unsigned{data[i + 1]} << 8 : 0) |
                       (i + 2 < n ? unsigned{data[i + 2]} : 0);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < n ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < n ? kAlphabet[v & 63] : '=';
  }
  return out;
}

}  // namespace

std::variant<ChatRequest, ApiError> parse_responses_request(std::string_view body) {
  auto parsed = object_with_model(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const nlohmann::json& j = std::get<nlohmann::json>(parsed);
  ChatRequest r;
  r.model = j["model"].get<std::string>();
  auto input = j.find("input");
  if (input == j.end() || input->is_null()) {
    return invalid("Missing required parameter: 'input'.", "input", "missing_required_parameter");
  }
  if (!input->is_string() && !input->is_array()) {
    return invalid("Invalid type for 'input': expected a string or an array.", "input",
                   "invalid_type");
  }
  r.prompt_tokens =
      tokens_for_chars(text_chars(*input) + text_chars(j.value("instructions", nlohmann::json())));
  if (auto e = read_stream(j, r)) return *e;
  if (auto e = read_cap(j, "max_output_tokens", r)) return *e;
  // Reasoning is shown (as summary text) only when a summary is asked for.
  r.show_reasoning = false;
  if (auto reasoning = j.find("reasoning"); reasoning != j.end() && reasoning->is_object()) {
    if (auto s = reasoning->find("summary"); s != reasoning->end() && s->is_string()) {
      r.show_reasoning = true;
    }
  }
  return r;
}

std::variant<ChatRequest, ApiError> parse_completions_request(std::string_view body) {
  auto parsed = object_with_model(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const nlohmann::json& j = std::get<nlohmann::json>(parsed);
  ChatRequest r;
  r.model = j["model"].get<std::string>();
  auto prompt = j.find("prompt");
  if (prompt == j.end() || prompt->is_null()) {
    return invalid("Missing required parameter: 'prompt'.", "prompt", "missing_required_parameter");
  }
  if (!prompt->is_string() && !(prompt->is_array() && !prompt->empty())) {
    return invalid("Invalid type for 'prompt': expected a string or an array.", "prompt",
                   "invalid_type");
  }
  r.prompt_tokens = tokens_for_chars(text_chars(*prompt));
  if (auto e = read_stream(j, r)) return *e;
  if (auto options = j.find("stream_options"); options != j.end() && options->is_object()) {
    r.has_stream_options = true;
    if (auto u = options->find("include_usage"); u != options->end() && u->is_boolean()) {
      r.include_usage = u->get<bool>();
    }
  }
  if (auto e = read_cap(j, "max_tokens", r)) return *e;
  r.show_reasoning = false;  // a completion model does not reason aloud
  return r;
}

std::variant<EmbeddingsRequest, ApiError> parse_embeddings_request(std::string_view body) {
  auto parsed = object_with_model(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const nlohmann::json& j = std::get<nlohmann::json>(parsed);
  EmbeddingsRequest r;
  r.model = j["model"].get<std::string>();
  auto input = j.find("input");
  if (input == j.end() || input->is_null()) {
    return invalid("Missing required parameter: 'input'.", "input", "missing_required_parameter");
  }
  auto as_text = [](const nlohmann::json& v) {
    return v.is_string() ? v.get<std::string>() : v.dump();
  };
  if (input->is_string()) {
    r.inputs.push_back(input->get<std::string>());
  } else if (input->is_array() && !input->empty()) {
    // An array of token ids is one input; an array of strings or of token
    // arrays is one input each.
    if (input->front().is_number()) {
      r.inputs.push_back(input->dump());
    } else {
      for (const auto& item : *input) r.inputs.push_back(as_text(item));
    }
  } else {
    return invalid("'$.input' is invalid. Please check the API reference.", "input",
                   "invalid_value");
  }
  for (const auto& in : r.inputs) r.prompt_tokens += tokens_for_chars(in.size());
  if (auto f = j.find("encoding_format"); f != j.end() && !f->is_null()) {
    if (*f == "base64") {
      r.base64 = true;
    } else if (*f != "float") {
      return invalid("Invalid value for 'encoding_format': expected 'float' or 'base64'.",
                     "encoding_format", "invalid_value");
    }
  }
  if (auto d = j.find("dimensions"); d != j.end() && !d->is_null()) {
    if (!d->is_number_integer() || d->get<std::int64_t>() < 1 || d->get<std::int64_t>() > 65536) {
      return invalid("Invalid 'dimensions': expected an integer in [1, 65536].", "dimensions",
                     "invalid_value");
    }
    r.dimensions = static_cast<int>(d->get<std::int64_t>());
  }
  return r;
}

std::string embeddings_body(const EmbeddingsRequest& r, int dimensions) {
  json data = json::array();
  for (std::size_t i = 0; i < r.inputs.size(); ++i) {
    std::uint64_t state = fnv1a(r.inputs[i]) | 1;
    std::vector<float> v(static_cast<std::size_t>(dimensions));
    double norm = 0;
    for (float& x : v) {
      state ^= state << 13;  // xorshift64
      state ^= state >> 7;
      state ^= state << 17;
      x = static_cast<float>(static_cast<double>(state >> 11) / 9007199254740992.0 * 2 - 1);
      norm += static_cast<double>(x) * x;
    }
    norm = std::sqrt(norm);
    for (float& x : v) x = static_cast<float>(x / norm);
    json embedding;
    if (r.base64) {
      std::vector<unsigned char> bytes(v.size() * 4);
      std::memcpy(bytes.data(), v.data(), bytes.size());  // little-endian float32, as OpenAI's
      embedding = base64(bytes.data(), bytes.size());
    } else {
      embedding = v;
    }
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", std::move(embedding)}});
  }
  return dump({{"object", "list"},
               {"data", std::move(data)},
               {"model", r.model},
               {"usage", {{"prompt_tokens", r.prompt_tokens}, {"total_tokens", r.prompt_tokens}}}});
}

// ---- Responses ----------------------------------------------------------------

ResponsesStream::ResponsesStream(std::string_view id, std::int64_t created, std::string_view model,
                                 Answer answer, bool capped, std::int64_t prompt_tokens,
                                 std::int64_t cached_tokens)
    : id_(id),
      created_(created),
      model_(model),
      answer_(std::move(answer)),
      capped_(capped),
      prompt_tokens_(prompt_tokens),
      cached_tokens_(cached_tokens) {}

void ResponsesStream::event(std::string& out, std::string_view type, std::string fields_json) {
  // {"type":..,<fields>,"sequence_number":n}
  out += "event: ";
  out += type;
  out += "\ndata: {\"type\":\"";
  out += type;
  out += '"';
  if (!fields_json.empty()) {
    out += ',';
    out.append(fields_json, 1, fields_json.size() - 2);  // the object's members
  }
  out += ",\"sequence_number\":" + std::to_string(sequence_++) + "}\n\n";
}

void ResponsesStream::open(std::string& out) {
  const json r = response_object(id_, created_, model_, "in_progress");
  event(out, "response.created", dump({{"response", r}}));
  event(out, "response.in_progress", dump({{"response", r}}));
}

void ResponsesStream::close_reasoning(std::string& out) {
  if (!reasoning_open_) return;
  reasoning_open_ = false;
  const std::string text = answer_.reasoning_text();
  const std::string rid = reasoning_id(id_);
  event(out, "response.reasoning_summary_text.done",
        dump({{"item_id", rid}, {"output_index", 0}, {"summary_index", 0}, {"text", text}}));
  event(out, "response.reasoning_summary_part.done",
        dump({{"item_id", rid},
              {"output_index", 0},
              {"summary_index", 0},
              {"part", {{"type", "summary_text"}, {"text", text}}}}));
  event(out, "response.output_item.done",
        dump({{"output_index", 0}, {"item", output_items(id_, answer_)[0]}}));
}

void ResponsesStream::token(std::string& out, int k) {
  const std::string piece(answer_.word(k));
  if (k < answer_.reasoning) {
    const std::string rid = reasoning_id(id_);
    if (!reasoning_open_) {
      reasoning_open_ = true;
      event(out, "response.output_item.added",
            dump({{"output_index", 0},
                  {"item", {{"id", rid}, {"type", "reasoning"}, {"summary", json::array()}}}}));
      event(out, "response.reasoning_summary_part.added",
            dump({{"item_id", rid},
                  {"output_index", 0},
                  {"summary_index", 0},
                  {"part", {{"type", "summary_text"}, {"text", ""}}}}));
    }
    event(out, "response.reasoning_summary_text.delta",
          dump({{"item_id", rid}, {"output_index", 0}, {"summary_index", 0}, {"delta", piece}}));
    return;
  }
  close_reasoning(out);
  const int index = answer_.reasoning > 0 ? 1 : 0;
  if (is_tool_call(answer_)) {
    const std::string fid = call_item_id(id_);
    if (!answer_open_) {
      answer_open_ = true;
      event(out, "response.output_item.added",
            dump({{"output_index", index},
                  {"item",
                   {{"id", fid},
                    {"type", "function_call"},
                    {"status", "in_progress"},
                    {"arguments", ""},
                    {"call_id", answer_.call_id},
                    {"name", kToolName}}}}));
    }
    const int j = k - answer_.reasoning;
    std::string delta = j == 0 ? "{\"query\":\"" : "";
    delta += piece;
    if (j == answer_.answer_tokens() - 1) delta += "\"}";
    event(out, "response.function_call_arguments.delta",
          dump({{"item_id", fid}, {"output_index", index}, {"delta", delta}}));
    return;
  }
  const std::string mid = message_id(id_);
  if (!answer_open_) {
    answer_open_ = true;
    event(out, "response.output_item.added",
          dump({{"output_index", index},
                {"item",
                 {{"id", mid},
                  {"type", "message"},
                  {"status", "in_progress"},
                  {"role", "assistant"},
                  {"content", json::array()}}}}));
    event(
        out, "response.content_part.added",
        dump({{"item_id", mid},
              {"output_index", index},
              {"content_index", 0},
              {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}}}));
  }
  event(out, "response.output_text.delta",
        dump({{"item_id", mid},
              {"output_index", index},
              {"content_index", 0},
              {"delta", piece},
              {"logprobs", json::array()}}));
}

void ResponsesStream::tail(std::string& out, int i) {
  if (i == 0) {
    close_reasoning(out);
    if (!answer_open_) return;
    const json items = output_items(id_, answer_);
    const int index = static_cast<int>(items.size()) - 1;
    const json& item = items.back();
    if (is_tool_call(answer_)) {
      event(out, "response.function_call_arguments.done",
            dump({{"item_id", item["id"]},
                  {"output_index", index},
                  {"arguments", item["arguments"]}}));
    } else {
      const json& part = item["content"][0];
      event(out, "response.output_text.done",
            dump({{"item_id", item["id"]},
                  {"output_index", index},
                  {"content_index", 0},
                  {"text", part["text"]},
                  {"logprobs", json::array()}}));
      event(out, "response.content_part.done",
            dump({{"item_id", item["id"]},
                  {"output_index", index},
                  {"content_index", 0},
                  {"part", part}}));
    }
    event(out, "response.output_item.done", dump({{"output_index", index}, {"item", item}}));
    return;
  }
  event(out, capped_ ? "response.incomplete" : "response.completed",
        dump({{"response", finished_response(id_, created_, model_, answer_, capped_,
                                             prompt_tokens_, cached_tokens_)}}));
}

void ResponsesStream::truncated(std::string& out) {
  out += "event: response.output_text.delta\ndata: {\"type\":\"response.output_te";
}

void ResponsesStream::malformed(std::string& out) {
  out += "event: response.output_text.delta\ndata: {not json\n\n";
}

void ResponsesStream::error(std::string& out) {
  const ApiError e = midstream_error(Protocol::kOpenAI);
  event(out, "error",
        dump({{"code", e.code ? json(*e.code) : json("server_error")},
              {"message", e.message},
              {"param", nullptr}}));
}

std::string responses_body(std::string_view id, std::int64_t created, std::string_view model,
                           const Answer& answer, bool capped, std::int64_t prompt_tokens,
                           std::int64_t cached_tokens) {
  return dump(finished_response(id, created, model, answer, capped, prompt_tokens, cached_tokens));
}

// ---- Stored responses ---------------------------------------------------------

ResponsesOptions responses_options(std::string_view body) {
  ResponsesOptions o;
  const json j = json::parse(body, nullptr, false);
  if (!j.is_object()) return o;
  if (auto s = j.find("store"); s != j.end() && s->is_boolean()) o.store = s->get<bool>();
  if (auto b = j.find("background"); b != j.end() && b->is_boolean()) o.background = b->get<bool>();
  json items = json::array();
  if (auto in = j.find("input"); in != j.end()) {
    if (in->is_string()) {
      items.push_back({{"type", "message"},
                       {"role", "user"},
                       {"content", json::array({{{"type", "input_text"}, {"text", *in}}})}});
    } else if (in->is_array()) {
      items = *in;
    }
  }
  int n = 0;
  for (auto& item : items) {
    if (item.is_object() && !item.contains("id")) item["id"] = "msg_in_" + std::to_string(++n);
  }
  o.input_items = dump(items);
  return o;
}

std::string queued_response(const std::string& finished_body) {
  json r = json::parse(finished_body, nullptr, false);
  if (!r.is_object()) return finished_body;
  r["status"] = "queued";
  r["background"] = true;
  r["output"] = json::array();
  r["usage"] = nullptr;
  return dump(r);
}

void ResponseStore::put(const std::string& id, Stored s) {
  std::lock_guard lock(mu_);
  if (stored_.insert_or_assign(id, std::move(s)).second) order_.push_back(id);
  while (order_.size() > kCapacity) {
    stored_.erase(order_.front());
    order_.pop_front();
  }
}

ResponseStore::Answer ResponseStore::answer(std::string_view method, const std::string& id,
                                            std::string_view part, bool stream,
                                            Clock::time_point now) {
  std::lock_guard lock(mu_);
  auto it = stored_.find(id);
  if (it == stored_.end()) {
    return {404, error_body(ApiError{404, "Response with id '" + id + "' not found.",
                                     "invalid_request_error", std::nullopt, std::nullopt})};
  }
  Stored& s = it->second;
  if (method == "DELETE") {
    stored_.erase(it);
    if (auto at = std::find(order_.begin(), order_.end(), id); at != order_.end()) order_.erase(at);
    return {200, dump({{"id", id}, {"object", "response.deleted"}, {"deleted", true}})};
  }
  if (part == "/input_items") {
    json items = json::parse(s.input_items, nullptr, false);
    if (!items.is_array()) items = json::array();
    json page = {{"object", "list"}, {"data", items}, {"has_more", false}};
    auto id_of = [](const json& item) {
      return item.is_object() ? item.value("id", json(nullptr)) : json(nullptr);
    };
    page["first_id"] = items.empty() ? json(nullptr) : id_of(items.front());
    page["last_id"] = items.empty() ? json(nullptr) : id_of(items.back());
    return {200, dump(page)};
  }
  const bool running = s.background && !s.cancelled && now < s.ready;
  if (part == "/cancel") {
    if (!s.background) {
      return {400, error_body(ApiError{400,
                                       "Only responses created with background=true can be "
                                       "cancelled.",
                                       "invalid_request_error", std::nullopt, std::nullopt})};
    }
    if (running) s.cancelled = true;
  }
  json r = json::parse(s.body, nullptr, false);
  if (!r.is_object()) r = json::object();
  r["background"] = s.background;
  if (s.cancelled) {
    r["status"] = "cancelled";
    r["output"] = json::array();
    r["usage"] = nullptr;
  } else if (running) {
    r["status"] = "in_progress";
    r["output"] = json::array();
    r["usage"] = nullptr;
  }
  if (!stream) return {200, dump(r)};
  // The stored response replayed as events: created, then its end.
  json created = r;
  created["status"] = "in_progress";
  created["output"] = json::array();
  created["usage"] = nullptr;
  const std::string status = r.value("status", "completed");
  const std::string end = status == "completed"    ? "response.completed"
                          : status == "incomplete" ? "response.incomplete"
                          : status == "cancelled"  ? "response.cancelled"
                                                   : "response.in_progress";
  std::string out;
  out += "event: response.created\ndata: " +
         dump({{"type", "response.created"}, {"sequence_number", 0}, {"response", created}}) +
         "\n\n";
  out += "event: " + end +
         "\ndata: " + dump({{"type", end}, {"sequence_number", 1}, {"response", r}}) + "\n\n";
  return {200, std::move(out), true};
}

// ---- Legacy completions -------------------------------------------------------

CompletionsStream::CompletionsStream(std::string_view id, std::int64_t created,
                                     std::string_view model, Answer answer,
                                     std::string_view finish_reason, bool include_usage,
                                     std::int64_t prompt_tokens)
    : id_(id),
      created_(created),
      model_(model),
      answer_(std::move(answer)),
      finish_reason_(finish_reason),
      include_usage_(include_usage),
      prompt_tokens_(prompt_tokens) {}

std::string CompletionsStream::chunk(std::string_view text, std::string_view finish_reason) const {
  json c = {
      {"id", id_},
      {"object", "text_completion"},
      {"created", created_},
      {"model", model_},
      {"choices", json::array({{{"text", text},
                                {"index", 0},
                                {"logprobs", nullptr},
                                {"finish_reason",
                                 finish_reason.empty() ? json(nullptr) : json(finish_reason)}}})}};
  return "data: " + dump(c) + "\n\n";
}

void CompletionsStream::token(std::string& out, int k) { out += chunk(answer_.word(k), ""); }

void CompletionsStream::tail(std::string& out, int i) {
  if (i == 0) {
    out += chunk("", finish_reason_);
    return;
  }
  if (i == 1 && include_usage_) {
    json u = {{"id", id_},
              {"object", "text_completion"},
              {"created", created_},
              {"model", model_},
              {"choices", json::array()},
              {"usage",
               {{"prompt_tokens", prompt_tokens_},
                {"completion_tokens", answer_.tokens},
                {"total_tokens", prompt_tokens_ + answer_.tokens}}}};
    out += "data: " + dump(u) + "\n\n";
    return;
  }
  ChunkFormatter::done(out);
}

std::string completions_body(std::string_view id, std::int64_t created, std::string_view model,
                             const Answer& answer, std::string_view finish_reason,
                             std::int64_t prompt_tokens) {
  std::string text;
  for (int k = 0; k < answer.tokens; ++k) text += answer.word(k);
  return dump({{"id", id},
               {"object", "text_completion"},
               {"created", created},
               {"model", model},
               {"choices", json::array({{{"text", text},
                                         {"index", 0},
                                         {"logprobs", nullptr},
                                         {"finish_reason", finish_reason}}})},
               {"usage",
                {{"prompt_tokens", prompt_tokens},
                 {"completion_tokens", answer.tokens},
                 {"total_tokens", prompt_tokens + answer.tokens}}}});
}

}  // namespace llmgate::sim
