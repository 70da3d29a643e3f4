// Fuzzes the admission of POST /v1/chat/completions bodies:
// gateway::parse_chat_request(content_type, body) and, for accepted requests,
// the OpenAI protocol's upstream body (providers::UpstreamProtocol::body).
// The admission reads the body through providers::RequestBody (a validating
// scanner's index, no DOM) and the upstream body is spliced from the client's
// text: both are checked against a reference on nlohmann's DOM (what the
// gateway did before), field by field and document by document. So are the
// Anthropic, Gemini and Bedrock protocols' bodies, their conversations written
// from the client's text (providers/anthropic_conversation.h,
// gemini_conversation.h, bedrock_conversation.h), against the documents'
// translations.
//
// Input: the first line is the Content-Type header value, the rest is the
// body. An input without '\n' is a body sent as application/json.
//
// Findings: any exception escaping parse_chat_request or the upstream body (the
// gateway answers a bad body with a 400, it does not throw), a sanitizer
// report, or a broken invariant (FUZZ_CHECK) below.
//
// Also: json_value_end and find_bytes against byte-at-a-time readings of
// the input as any text.
//
// Regression seeds (corpus/fuzz_chat_request/regression-*) replay the fixed
// findings in tests/fuzz/findings/: a number beyond a double (1e400) and
// nesting past providers::kMaxJsonDepth.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>
#include <variant>
#include <vector>

#include "gateway/apis/chat_request.h"
#include "providers/anthropic_conversation.h"
#include "providers/bedrock_conversation.h"
#include "providers/find_bytes.h"
#include "providers/gemini_conversation.h"
#include "providers/json_depth.h"
#include "providers/json_write.h"
#include "providers/prompt_prefix.h"
#include "providers/prompt_size.h"
#include "providers/upstream_protocol.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using llmgate::gateway::ApiError;
using llmgate::gateway::ChatRequest;
using nlohmann::json;

const std::string kUpstreamModel = "upstream-model";

// LLMGATE_FUZZ_VERBOSE=1: print each input's outcome (for triage and seeds).
bool g_verbose = false;

[[noreturn]] void escaped(const char* where, const std::exception& e) {
  std::fprintf(stderr, "%s threw %s: %s\n", where, typeid(e).name(), e.what());
  std::abort();
}

// Nesting depth of a parsed document (a scalar is 0, [] and {} are 1), but at
// most cap + 1: the recursion stops there, so a replayed reproducer nested
// 100,000 deep (longer than -max_len) cannot overflow the harness's stack.
int depth_of(const json& j, int cap) {
  if (!j.is_structured()) return 0;
  if (cap == 0) return 1;
  int deepest = 0;
  for (const json& child : j) deepest = std::max(deepest, depth_of(child, cap - 1));
  return deepest + 1;
}

json without_gateway_keys(json j) {
  for (const char* key : {"model", "stream", "stream_options", "route"}) j.erase(key);
  return j;
}

void check_rejected(const ApiError& e) {
  FUZZ_CHECK(e.status == 400 || e.status == 415);
  FUZZ_CHECK(e.type == "invalid_request_error");
  FUZZ_CHECK(!e.message.empty());
  FUZZ_CHECK((e.status == 415) == (e.code == "unsupported_media_type"));
  // The error body is always a well-formed OpenAI error document.
  const json doc = json::parse(e.body(), nullptr, /*allow_exceptions=*/false);
  FUZZ_CHECK(doc.is_object() && doc.contains("error"));
  const json& err = doc.at("error");
  FUZZ_CHECK(err.is_object() && err.contains("message") && err.at("message").is_string());
  FUZZ_CHECK(err.at("type") == "invalid_request_error");
}

// The reference admission, on nlohmann's DOM (what the gateway did before
// it admitted requests from the scanner's index, RequestBody): whether `doc`
// is a valid chat request, and if so what the request reads.
struct Reference {
  bool valid = false;
  bool stream = false;
  bool include_usage = false;
  std::optional<std::int64_t> max_tokens;
};

Reference reference(const json& doc) {
  Reference r;
  if (!doc.is_object()) return r;
  auto present = [&](const char* key) { return doc.contains(key) && !doc.at(key).is_null(); };
  if (!present("model") || !doc.at("model").is_string() ||
      doc.at("model").get<std::string>().empty())
    return r;
  if (!present("messages") || !doc.at("messages").is_array() || doc.at("messages").empty())
    return r;
  for (const json& m : doc.at("messages")) {
    if (!m.is_object() || !m.contains("role") || !m.at("role").is_string()) return r;
  }
  if (present("stream")) {
    if (!doc.at("stream").is_boolean()) return r;
    r.stream = doc.at("stream").get<bool>();
  }
  if (present("stream_options")) {
    const json& so = doc.at("stream_options");
    if (!so.is_object() || !r.stream) return r;
    if (so.contains("include_usage") && !so.at("include_usage").is_null()) {
      if (!so.at("include_usage").is_boolean()) return r;
      r.include_usage = so.at("include_usage").get<bool>();
    }
  }
  for (const char* key : {"max_tokens", "max_completion_tokens", "n"}) {
    if (!present(key)) continue;
    const json& v = doc.at(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0) return r;
    if (std::string_view(key) != "n") r.max_tokens = v.get<std::int64_t>();
  }
  r.valid = true;
  return r;
}

// Whether some object in the JSON text `text` has a key twice (nlohmann
// keeps the last, so a parsed comparison cannot see it; an upstream may
// read the first).
bool repeated_key(const std::string& text) {
  std::vector<std::vector<std::string>> open;
  bool repeated = false;
  json::parser_callback_t see = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) open.emplace_back();
    if (event == json::parse_event_t::object_end) open.pop_back();
    if (event == json::parse_event_t::key && !open.empty()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      auto& keys = open.back();
      if (std::find(keys.begin(), keys.end(), key) != keys.end()) repeated = true;
      keys.push_back(key);
    }
    return true;
  };
  (void)json::parse(text, see, /*allow_exceptions=*/false);
  return repeated;
}

// A translating protocol's body with the conversation written from the
// client's text (anthropic_chat_body_text, gemini_chat_body_text) says what
// the document's translation says whenever it answers: the same refusal, or
// a body that parses to the same document, with no key repeated. Where it
// declines, the gateway uses the document's.
using Body = std::variant<std::string, llmgate::providers::Untranslatable>;
using WrittenBody = std::optional<Body> (*)(const llmgate::providers::RequestBody&,
                                            const llmgate::providers::UpstreamRequest&);
using DocumentBody = Body (*)(const json&, const llmgate::providers::UpstreamRequest&);

void check_written_body(const char* name, WrittenBody write, DocumentBody translate,
                        const ChatRequest& r, const json& client) {
  static const llmgate::config::Provider provider;  // default budgets and max_tokens
  llmgate::providers::UpstreamRequest request;
  request.upstream_model = kUpstreamModel;
  request.provider = &provider;
  request.stream = r.stream;
  std::optional<Body> text;
  Body ref;
  try {
    text = write(r.body, request);
    ref = translate(client, request);
  } catch (const std::exception& e) {
    escaped(name, e);
  }
  if (g_verbose) std::fprintf(stderr, "%s: %s\n", name, text ? "written" : "declined");
  if (!text) return;
  if (const auto* refused = std::get_if<llmgate::providers::Untranslatable>(&ref)) {
    const auto* also = std::get_if<llmgate::providers::Untranslatable>(&*text);
    FUZZ_CHECK(also != nullptr);
    FUZZ_CHECK(also->message == refused->message);
    FUZZ_CHECK(also->param == refused->param);
    return;
  }
  FUZZ_CHECK(std::holds_alternative<std::string>(*text));
  const json written = json::parse(std::get<std::string>(*text), nullptr, false);
  FUZZ_CHECK(!written.is_discarded());
  FUZZ_CHECK(written == json::parse(std::get<std::string>(ref)));
  FUZZ_CHECK(!repeated_key(std::get<std::string>(*text)));
}

void check_accepted(const ChatRequest& r, const json& doc) {
  FUZZ_CHECK(!r.model.empty());
  // The scanner's admission reads what the DOM's did.
  FUZZ_CHECK(doc.is_object());
  const Reference ref = reference(doc);
  FUZZ_CHECK(ref.valid);
  FUZZ_CHECK(doc.at("model") == r.model);
  FUZZ_CHECK(r.stream == ref.stream);
  FUZZ_CHECK(r.include_usage == ref.include_usage);
  FUZZ_CHECK(r.max_tokens == ref.max_tokens);
  FUZZ_CHECK(r.route == (doc.contains("route") ? doc.at("route") : json()));
  FUZZ_CHECK(!r.include_usage || r.stream);
  FUZZ_CHECK(!r.max_tokens || *r.max_tokens >= 0);
  json client = doc;
  client.erase("route");
  FUZZ_CHECK(!r.body.contains("route"));  // the override is never forwarded

  std::string up;
  try {
    ChatRequest copy = r;
    FUZZ_CHECK(copy.body.dom() == client);  // the lazily parsed document
    llmgate::providers::UpstreamRequest request;
    request.upstream_model = kUpstreamModel;
    up = std::get<std::string>(llmgate::providers::openai_chat_protocol().body(copy.body, request));
  } catch (const std::exception& e) {
    escaped("upstream_body", e);
  }
  check_written_body("anthropic body", llmgate::providers::anthropic_chat_body_text,
                     llmgate::providers::anthropic_chat_body_from_document, r, client);
  check_written_body("gemini body", llmgate::providers::gemini_chat_body_text,
                     llmgate::providers::gemini_chat_body_from_document, r, client);
  check_written_body("bedrock body", llmgate::providers::bedrock_chat_body_text,
                     llmgate::providers::bedrock_chat_body_from_document, r, client);
  // The upstream body always parses back (nothing the gateway forwards can be
  // unparsable, e.g. a NaN or a number out of range).
  const json u = json::parse(up, nullptr, /*allow_exceptions=*/false);
  FUZZ_CHECK(!u.is_discarded());
  FUZZ_CHECK(u.is_object());
  FUZZ_CHECK(u.contains("model") && u.at("model") == kUpstreamModel);
  FUZZ_CHECK(u.contains("stream") && u.at("stream") == true);
  FUZZ_CHECK(u.contains("stream_options") && u.at("stream_options").is_object());
  const json& so = u.at("stream_options");
  FUZZ_CHECK(so.contains("include_usage") && so.at("include_usage") == true);
  FUZZ_CHECK(!u.contains("route"));
  // No key twice: of a repeated one only the value admission read goes up.
  const auto spliced = llmgate::providers::RequestBody::parse(up);
  FUZZ_CHECK(std::holds_alternative<llmgate::providers::RequestBody>(spliced));
  FUZZ_CHECK(std::get<llmgate::providers::RequestBody>(spliced).members().size() == u.size());
  // Every other field passes through untouched (the spliced text reads as the
  // client's document did) ...
  FUZZ_CHECK(without_gateway_keys(u) == without_gateway_keys(client));
  // ... and so do the client's other stream_options.
  if (auto it = client.find("stream_options"); it != client.end() && it->is_object()) {
    for (const auto& [key, value] : it->items()) {
      if (key != "include_usage") FUZZ_CHECK(so.contains(key) && so.at(key) == value);
    }
  }
}

// A JSON body with an acceptable media type is refused as invalid_json
// exactly when it nests deeper than kMaxJsonDepth or is not JSON (nlohmann's
// non-throwing parse, which also refuses numbers beyond a double); the depth
// guard agrees with the real depth of every well-formed document.
//
// nlohmann's lexer takes a NUL byte outside a string for the end of input, so
// "{...}\0<anything>" parses as "{...}" (tests/fuzz/findings/README.md):
// parse_chat_request refuses any body with a NUL byte, and the depths are
// compared on the text before the first NUL.
void check_json_verdict(std::string_view body, const std::variant<ChatRequest, ApiError>& result) {
  const auto* error = std::get_if<ApiError>(&result);
  if (body.empty() || (error != nullptr && error->status == 415)) return;
  const bool too_deep = llmgate::providers::json_too_deep(body);
  const json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_discarded()) {
    const std::string_view parsed_text = body.substr(0, body.find('\0'));
    const int cap = llmgate::providers::kMaxJsonDepth;
    FUZZ_CHECK(llmgate::providers::json_too_deep(parsed_text) == (depth_of(parsed, cap) > cap));
  }
  const bool invalid_json = error != nullptr && error->code == "invalid_json";
  const bool has_nul = body.find('\0') != std::string_view::npos;
  FUZZ_CHECK(invalid_json == (has_nul || too_deep || parsed.is_discarded()));
  if (invalid_json) FUZZ_CHECK(error->status == 400);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_verbose = std::getenv("LLMGATE_FUZZ_VERBOSE") != nullptr;
  return 0;
}

namespace {

// The walk of a validated value (walk_members, walk_elements) says what the
// document says of it, at every depth (and RequestBody::value_end what
// json_value_end says): the members (the last of a key) and
// elements, each one's type, a string's value and whether it has an
// escape, a number's integer reading; an array's elements where
// each_element, which validates again, finds them.
void check_walk(const llmgate::providers::RequestBody& body,
                const llmgate::providers::RequestBody::Member& m, const json& j) {
  using llmgate::providers::RequestBody;
  using Type = RequestBody::Type;
  // Where a container ends, as the index recorded it (a large one) or a
  // scan finds it, is where the scan of the text finds it.
  if (m.v.type == Type::kObject || m.v.type == Type::kArray)
    FUZZ_CHECK(body.value_end(m.value) == llmgate::providers::json_value_end(body.text(), m.value));
  switch (m.v.type) {
    case Type::kObject: {
      FUZZ_CHECK(j.is_object());
      std::vector<std::pair<std::string, RequestBody::Member>> last;
      FUZZ_CHECK(body.walk_members(m, [&](std::string_view key, const RequestBody::Member& e) {
        FUZZ_CHECK(e.begin == e.value && e.value < e.end && e.end <= m.end);
        auto it =
            std::find_if(last.begin(), last.end(), [&](const auto& k) { return k.first == key; });
        if (it == last.end())
          last.emplace_back(std::string(key), e);
        else
          it->second = e;
      }));
      FUZZ_CHECK(last.size() == j.size());
      for (const auto& [key, e] : last) {
        FUZZ_CHECK(j.contains(key));
        check_walk(body, e, j[key]);
      }
      return;
    }
    case Type::kArray: {
      FUZZ_CHECK(j.is_array());
      std::vector<RequestBody::Member> scanned;
      body.each_element(m, [&](std::size_t, const RequestBody::Member& e) {
        scanned.push_back(e);
        return true;
      });
      std::size_t n = 0;
      FUZZ_CHECK(body.walk_elements(m, [&](std::size_t i, const RequestBody::Member& e) {
        FUZZ_CHECK(i == n && n < scanned.size());
        const RequestBody::Member& want = scanned[n++];
        FUZZ_CHECK(e.begin == want.begin && e.end == want.end && e.v.type == want.v.type);
        check_walk(body, e, j[i]);
        return true;
      }));
      FUZZ_CHECK(n == scanned.size() && n == j.size());
      return;
    }
    case Type::kString:
      FUZZ_CHECK(j.is_string() && body.string_of(m) == j.get<std::string>());
      FUZZ_CHECK(m.v.escaped == (body.text_of(m).find('\\') != std::string_view::npos));
      return;
    case Type::kNumber:
      FUZZ_CHECK(j.is_number());
      FUZZ_CHECK(m.v.integer == (j.is_number_integer() || j.is_number_unsigned()));
      if (m.v.fits_int64) FUZZ_CHECK(j.is_number_integer() && j.get<std::int64_t>() == m.v.int64);
      return;
    case Type::kTrue:
    case Type::kFalse:
      FUZZ_CHECK(j.is_boolean() && j.get<bool>() == (m.v.type == Type::kTrue));
      return;
    case Type::kNull:
      FUZZ_CHECK(j.is_null());
      return;
  }
}

// The prompt's prefixes (prompt-cache affinity): one cut per element of the
// conversation (the `messages` array, else an `input` array) -- found by
// the boundary scanner, counted here by nlohmann -- kept as the preamble's,
// the first element's and the latest; growing; within the body.
void check_prefixes(std::string_view body, const json& doc,
                    const llmgate::providers::PromptSize& prompt) {
  using llmgate::providers::PromptPrefixes;
  auto parsed = llmgate::providers::RequestBody::parse(std::string(body));
  auto* request = std::get_if<llmgate::providers::RequestBody>(&parsed);
  FUZZ_CHECK(request != nullptr);
  for (const auto& m : request->members()) {
    const std::string_view key = request->key(m);
    if (!m.superseded && !key.empty()) check_walk(*request, m, doc[std::string(key)]);
  }
  // Every array member's elements with their "role", in one scan, as
  // each_element and member_of find them in two.
  using Member = llmgate::providers::RequestBody::Member;
  for (const auto& [key, value] : doc.items()) {
    const Member* array = request->find(key);
    if (array == nullptr || array->v.type != llmgate::providers::RequestBody::Type::kArray)
      continue;
    std::vector<std::pair<Member, std::optional<Member>>> want;
    request->each_element(*array, [&](std::size_t, const Member& m) {
      want.emplace_back(m, request->member_of(m, "role"));
      return true;
    });
    std::size_t n = 0;
    FUZZ_CHECK(request->each_element_with(
        *array, "role", [&](std::size_t i, const Member& m, const Member* role) {
          FUZZ_CHECK(i == n && n < want.size());
          const auto& [element, found] = want[n++];
          FUZZ_CHECK(m.begin == element.begin && m.end == element.end);
          FUZZ_CHECK(m.v.type == element.v.type && m.v.size == element.v.size);
          FUZZ_CHECK((role != nullptr) == found.has_value());
          if (role) FUZZ_CHECK(role->value == found->value && role->end == found->end);
          return true;
        }));
    FUZZ_CHECK(n == want.size());
  }
  const PromptPrefixes p = llmgate::providers::prompt_prefixes(*request);
  const json* conversation = nullptr;
  if (auto m = doc.find("messages"); m != doc.end() && m->is_array()) {
    conversation = &*m;
  } else if (auto in = doc.find("input"); in != doc.end() && in->is_array()) {
    conversation = &*in;
  }
  if (conversation == nullptr || conversation->empty()) {
    FUZZ_CHECK(p.count == 0);
    return;
  }
  bool preamble = false;
  for (const char* key :
       {"tools", "functions", "response_format", "text", "system", "instructions"})
    preamble = preamble || doc.contains(key);
  const std::size_t firsts = (preamble ? 1 : 0) + 1;
  FUZZ_CHECK(p.firsts == firsts);
  FUZZ_CHECK(p.count ==
             firsts + std::min(conversation->size() - 1, PromptPrefixes::kMaxCuts - firsts));
  std::uint32_t media = 0;
  for (std::size_t i = 0; i < p.count; ++i) {
    FUZZ_CHECK(p.cuts[i].hash != 0);
    FUZZ_CHECK(p.cuts[i].bytes <= prompt.bytes);
    if (i > 0) {
      FUZZ_CHECK(p.cuts[i].bytes >= p.cuts[i - 1].bytes);
      FUZZ_CHECK(p.cuts[i].media >= p.cuts[i - 1].media);
    }
    media = p.cuts[i].media;
  }
  FUZZ_CHECK(media <= prompt.media);
}

// kept_members (a stream's chunk rewritten without a parse) against
// RequestBody::spliced, the reference: where it answers, the same document,
// and never for something that is not a JSON object.
void check_kept_members(std::string_view body) {
  using llmgate::providers::KeptMembers;
  using llmgate::providers::RequestBody;
  for (std::string_view drop : {"usage", "model"}) {
    KeptMembers kept;
    if (!llmgate::providers::kept_members(body, drop, kept)) continue;
    FUZZ_CHECK(kept.count <= KeptMembers::kMax);
    std::string joined = "{";
    for (std::size_t i = 0; i < kept.count; ++i) {
      if (i) joined += ',';
      joined.append(kept.text[i]);
    }
    joined += '}';
    auto parsed = RequestBody::parse(std::string(body));
    auto* b = std::get_if<RequestBody>(&parsed);
    FUZZ_CHECK(b != nullptr);
    FUZZ_CHECK(b->spliced({}, {drop}) == joined);
  }
}

}  // namespace

namespace value_end {

// prompt_prefixes' value end before json_value_end searched strings with
// memchr: a byte at a time, a backslash skipping the byte after it.
std::size_t reference(std::string_view t, std::size_t p) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  int depth = 0;
  while (p < t.size()) {
    const char c = t[p];
    if (c == '"') {
      for (++p; p < t.size() && t[p] != '"'; ++p) {
        if (t[p] == '\\') ++p;
      }
      ++p;
      if (depth == 0) return p;
      continue;
    }
    if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return p;
      if (--depth == 0) return p + 1;
    } else if (depth == 0 && (c == ',' || space(c))) {
      return p;
    }
    ++p;
  }
  return t.size();
}

// The same end for any text, from the start and from the first 64 quotes
// and brackets (past the end: any value from text.size() up).
void check(std::string_view t) {
  const auto same = [&](std::size_t at) {
    const std::size_t got = llmgate::providers::json_value_end(t, at);
    const std::size_t want = reference(t, at);
    FUZZ_CHECK(std::min(got, t.size()) == std::min(want, t.size()));
  };
  same(0);
  std::size_t starts = 0;
  for (std::size_t i = 0; i < t.size() && starts < 64; ++i) {
    if (t[i] == '"' || t[i] == '{' || t[i] == '[') {
      same(i);
      ++starts;
    }
  }
  // find_bytes finds what string_view::find finds (the body scans' needles,
  // and short ones whose two compared bytes are alike), from the start and
  // from a few places in.
  for (std::string_view needle :
       {std::string_view("\"data:"), std::string_view("\"cache_control\""),
        std::string_view("\"\""), std::string_view("aba"), std::string_view("\":")}) {
    for (std::size_t from : {std::size_t{0}, std::size_t{1}, t.size() / 3, t.size()}) {
      FUZZ_CHECK(llmgate::providers::find_bytes(t, needle, from) == t.find(needle, from));
    }
  }
}

}  // namespace value_end

// write_json writes what nlohmann's dump(replace) writes, byte for byte: any
// document (as json and as ordered_json), and the input's bytes as one
// string (invalid UTF-8 included); valid_utf8 judges a string as
// nlohmann's strict parse of it does.
namespace json_write {

template <class Json>
void same(const Json& j) {
  FUZZ_CHECK(llmgate::providers::json_text(j) ==
             j.dump(-1, ' ', false, Json::error_handler_t::replace));
}

void check(std::string_view input, const json& doc) {
  const std::string bytes(input);
  same(json(bytes));
  same(nlohmann::ordered_json(bytes));
  const bool strict = !json::parse("\"" + bytes + "\"", nullptr, false).is_discarded();
  if (bytes.find_first_of(std::string_view("\"\\\0", 3)) == std::string::npos &&
      std::none_of(bytes.begin(), bytes.end(), [](char c) { return c >= 0 && c < 0x20; }))
    FUZZ_CHECK(llmgate::providers::valid_utf8(bytes) == strict);
  if (doc.is_discarded()) return;
  same(doc);
  same(nlohmann::ordered_json::parse(doc.dump()));
}

}  // namespace json_write

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  value_end::check(input);
  std::string_view content_type = "application/json";
  std::string_view body = input;
  if (auto nl = input.find('\n'); nl != std::string_view::npos) {
    content_type = input.substr(0, nl);
    body = input.substr(nl + 1);
  }

  std::variant<ChatRequest, ApiError> result;
  try {
    result = llmgate::gateway::parse_chat_request(content_type, std::string(body));
  } catch (const std::exception& e) {
    escaped("parse_chat_request", e);
  }

  const bool nul = body.find('\0') != std::string_view::npos;
  const json doc = nul || llmgate::providers::json_too_deep(body)
                       ? json(json::value_t::discarded)
                       : json::parse(body, nullptr, /*allow_exceptions=*/false);
  json_write::check(input, doc);
  if (const auto* error = std::get_if<ApiError>(&result)) {
    if (g_verbose) std::fprintf(stderr, "%d: %s\n", error->status, error->message.c_str());
    check_rejected(*error);
    // Refused a body the reference admits only for its media type.
    if (error->status != 415) FUZZ_CHECK(doc.is_discarded() || !reference(doc).valid);
  } else {
    if (g_verbose) std::fprintf(stderr, "accepted\n");
    check_accepted(std::get<ChatRequest>(result), doc);
  }
  check_json_verdict(body, result);
  // The prompt's size (admission measures every admitted body; any text
  // here): every byte is text or media, media are whole strings.
  const llmgate::providers::PromptSize prompt = llmgate::providers::measure_prompt(body);
  FUZZ_CHECK(prompt.bytes + prompt.media_bytes == body.size());
  // Each medium is a whole string: its quotes, "data:" and ";base64,".
  FUZZ_CHECK(prompt.media_bytes >= 15 * static_cast<std::size_t>(prompt.media));
  if (doc.is_object()) check_prefixes(body, doc, prompt);
  check_kept_members(body);
  return 0;
}
