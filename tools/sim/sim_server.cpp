// The simulated provider's HTTP/1.1 server.
//
// Threading: `threads` shards, each an io_context run by exactly one thread,
// so everything a connection touches (socket, buffer, timers) lives on one
// thread without strands. One acceptor hands connections to the shards round
// robin. Shared state (profiles, last request) is behind mutexes and touched
// once per request; counters are atomics.
//
// Streams cost a coroutine and a timer each, not a thread: pacing is a timer
// against absolute deadlines, and each token is one gather write of a reused
// buffer.
#include "tools/sim/sim_server.h"

#include <algorithm>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <variant>
#include <vector>

#include "config/rfc3339.h"
#include "tools/sim/sim_bedrock.h"
#include "tools/sim/sim_openai_apis.h"
#include "tools/sim/sim_protocol.h"

namespace llmgate::sim {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using namespace net::experimental::awaitable_operators;

constexpr auto use_tuple = net::as_tuple(net::use_awaitable);

constexpr std::uint32_t kHeaderLimit = 64 * 1024;
constexpr std::uint64_t kBodyLimit = 1024 * 1024;
constexpr auto kReadTimeout = 30s;   // idle keep-alive, or a request that trickles in
constexpr auto kWriteTimeout = 30s;  // a client that stops draining is treated as gone
// Bytes a client may send (pipelined requests) while a response is being
// written; past this the connection is no longer watched for hang-ups.
constexpr std::size_t kPipelineLimit = 64 * 1024;

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

enum class Outcome { kCompleted, kClientGone, kCut, kErrored };

struct Shard {
  explicit Shard(std::uint64_t seed) : rng(seed) {}
  net::io_context ioc{1};
  net::executor_work_guard<net::io_context::executor_type> work = net::make_work_guard(ioc);
  Rng rng;  // only touched from this shard's thread
};

// Decrements in_flight on every path out of a request, including the
// destruction of a suspended coroutine at shutdown; keeps the peak.
class InFlight {
 public:
  InFlight(std::atomic<std::uint64_t>& n, std::atomic<std::uint64_t>& peak) : n_(n) {
    const std::uint64_t now = n_.fetch_add(1) + 1;
    std::uint64_t was = peak.load();
    while (was < now && !peak.compare_exchange_weak(was, now)) {
    }
  }
  ~InFlight() { n_.fetch_sub(1); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::atomic<std::uint64_t>& n_;
};

std::uint64_t shard_seed(std::uint64_t seed, std::size_t index) {
  // Shard 0 uses the seed as given, so a one-thread server is reproducible
  // from --seed alone.
  return seed + index * 0x9E3779B97F4A7C15ULL;
}

std::string to_lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool is_chat_path(std::string_view path) {
  // Any prefix, so base_url may carry one (/openai/v1/chat/completions).
  return path == "/chat/completions" || ends_with(path, "/chat/completions");
}

// POST …/responses, …/embeddings, …/completions (not …/chat/completions).
std::optional<OpenAiApi> openai_api_path(std::string_view path) {
  if (is_chat_path(path)) return std::nullopt;
  if (path == "/responses" || ends_with(path, "/responses")) return OpenAiApi::kResponses;
  if (path == "/embeddings" || ends_with(path, "/embeddings")) return OpenAiApi::kEmbeddings;
  if (path == "/completions" || ends_with(path, "/completions")) return OpenAiApi::kCompletions;
  return std::nullopt;
}

bool is_messages_path(std::string_view path) {
  return path == "/messages" || ends_with(path, "/messages");  // Anthropic's /v1/messages
}

bool is_count_tokens_path(std::string_view path) {
  return ends_with(path, "/messages/count_tokens");  // Anthropic's token counting
}

std::string dump(const json& j) {
  // Recorded bodies are client bytes: replace invalid UTF-8 rather than throw.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Clock::duration to_duration(double ms) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(ms));
}

Response make_response(unsigned version, bool keep_alive, int status, std::string body,
                       std::string_view content_type) {
  Response res{static_cast<http::status>(status), version};
  // Beast knows no reason phrase for Anthropic's 529.
  if (status == 529) res.reason("Site Overloaded");
  res.set(http::field::server, "llmgate-sim");
  res.set(http::field::content_type, content_type);
  res.keep_alive(keep_alive);
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

Response make_response(const Request& req, http::status status, std::string body,
                       std::string_view content_type = "application/json") {
  return make_response(req.version(), req.keep_alive(), static_cast<int>(status), std::move(body),
                       content_type);
}

Response make_error(const Request& req, const ApiError& e) {
  return make_response(req, static_cast<http::status>(e.status), error_body(e));
}

constexpr std::string_view kGoogleJson = "application/json; charset=UTF-8";

// An error in `protocol`'s shape with the headers that vendor sends with it
// (Gemini's carry no request id). A retry delay is a Retry-After header for OpenAI and Anthropic, a
// google.rpc.RetryInfo detail in the body for Gemini (Google sends no header).
Response make_protocol_error(unsigned version, bool keep_alive, Protocol protocol,
                             const ApiError& e, std::string_view request_id = "",
                             std::optional<int> retry_after_s = std::nullopt) {
  Response res;
  switch (protocol) {
    case Protocol::kAnthropic:
      res = make_response(version, keep_alive, e.status, anthropic_error_body(e, request_id),
                          "application/json");
      if (!request_id.empty()) res.set("request-id", request_id);
      break;
    case Protocol::kGemini:
      return make_response(version, keep_alive, e.status, gemini_error_body(e, retry_after_s),
                           kGoogleJson);
    case Protocol::kBedrock:
      // The type in a header (restJson1), the body only {"message"}; no Retry-After.
      res = make_response(version, keep_alive, e.status, bedrock_error_body(e), "application/json");
      res.set("x-amzn-ErrorType", e.type);
      if (!request_id.empty()) res.set("x-amzn-RequestId", request_id);
      return res;
    case Protocol::kOpenAI:
      res = make_response(version, keep_alive, e.status, error_body(e), "application/json");
      if (!request_id.empty()) res.set("x-request-id", request_id);
      break;
  }
  if (retry_after_s) res.set(http::field::retry_after, std::to_string(*retry_after_s));
  return res;
}

Response make_protocol_error(const Request& req, Protocol protocol, const ApiError& e,
                             std::string_view request_id = "") {
  return make_protocol_error(req.version(), req.keep_alive(), protocol, e, request_id);
}

// Anthropic on Vertex AI: .../publishers/anthropic/models/{model}:rawPredict
// or :streamRawPredict; the model.
std::optional<std::string> vertex_anthropic_model(std::string_view path) {
  constexpr std::string_view kModels = "/publishers/anthropic/models/";
  const std::size_t at = path.find(kModels);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = path.substr(at + kModels.size());
  for (std::string_view verb : {":streamRawPredict", ":rawPredict"}) {
    if (rest.ends_with(verb) && rest.size() > verb.size())
      return std::string(rest.substr(0, rest.size() - verb.size()));
  }
  return std::nullopt;
}

ApiError not_found(const Request& req) {
  return ApiError{
      404,
      "Invalid URL (" + std::string(req.method_string()) + " " + std::string(req.target()) + ")",
      "invalid_request_error", std::nullopt, std::nullopt};
}

ApiError method_not_allowed(const Request& req) {
  return ApiError{405, "Method " + std::string(req.method_string()) + " is not allowed here.",
                  "invalid_request_error", std::nullopt, std::nullopt};
}

// True once the coroutine's parent (the `||` race) has asked it to stop. A
// cancellation emitted while an operation was completing anyway is not
// delivered to the next operation, so racing coroutines check between steps.
net::awaitable<bool> cancelled() {
  const auto state = co_await net::this_coro::cancellation_state;
  co_return state.cancelled() != net::cancellation_type::none;
}

net::awaitable<bool> write_response(beast::tcp_stream& stream, Response res) {
  stream.expires_after(kWriteTimeout);
  auto [ec, n] = co_await http::async_write(stream, res, use_tuple);
  co_return !ec && res.keep_alive();
}

// Writes one event. With HTTP/1.1 it is framed as its own chunk by hand
// (Beast's make_chunk allocates per call); HTTP/1.0 gets the raw bytes and a
// close at the end.
net::awaitable<bool> write_event(beast::tcp_stream& stream, bool chunked, std::string_view data) {
  char size_line[24];
  std::size_t size_len = 0;
  if (chunked) {
    auto [end, ec] = std::to_chars(size_line, size_line + sizeof size_line - 2, data.size(), 16);
    *end++ = '\r';
    *end++ = '\n';
    size_len = static_cast<std::size_t>(end - size_line);
  }
  const std::array<net::const_buffer, 3> buffers = {net::buffer(size_line, size_len),
                                                    net::buffer(data.data(), data.size()),
                                                    net::buffer("\r\n", chunked ? 2 : 0)};
  stream.expires_after(kWriteTimeout);
  auto [ec, n] = co_await net::async_write(stream, buffers, use_tuple);
  co_return !ec && !co_await cancelled();
}

// Completes only when the client hangs up (EOF, reset) or the socket is
// closed under it; anything the client sends meanwhile (a pipelined request)
// is kept in `buffer` for the next read. Racing this against the response is
// what lets a stall of ten minutes notice a vanished client at once.
net::awaitable<void> watch_for_hangup(tcp::socket& socket, beast::flat_buffer& buffer) {
  co_await net::this_coro::throw_if_cancelled(false);
  while (buffer.size() < kPipelineLimit) {
    auto [ec, n] = co_await socket.async_read_some(buffer.prepare(4096), use_tuple);
    if (ec) co_return;
    buffer.commit(n);
    if (co_await cancelled()) co_return;
  }
  if (co_await cancelled()) co_return;
  // The client is alive and busy; stop reading (bounded buffer) and wait to be
  // cancelled when the response ends.
  net::steady_timer forever(socket.get_executor(), Clock::time_point::max());
  co_await forever.async_wait(use_tuple);
}

// Everything one model response needs once it has been planned.
struct Exchange {
  Clock::time_point received;
  unsigned version = 11;
  bool keep_alive = true;
  Protocol protocol = Protocol::kOpenAI;
  std::uint64_t number = 0;  // numbers the ids; 0 until drawn
  std::string id;            // chatcmpl-sim-N, msg_sim_N or Gemini's responseId
  std::string request_id;
  std::string call_id;  // a tool call's or an audio answer's id
  std::int64_t created = 0;
  std::string region;
  ChatRequest chat;
  ChatPlan plan;
  Profile profile;
  bool azure = false;                // SimOptions::azure_api_version
  bool stamp = false;                // SimOptions::stamp_events
  bool sse = true;                   // Gemini streaming: alt=sse, else a JSON array
  OpenAiApi api = OpenAiApi::kChat;  // OpenAI: which endpoint
  EmbeddingsRequest embeddings;      // OpenAiApi::kEmbeddings
  ResponsesOptions responses;        // OpenAiApi::kResponses
};

// …/responses/{id}, …/responses/{id}/input_items, …/responses/{id}/cancel
// (any prefix): the id and the part after it ("", "/input_items", "/cancel").
std::optional<std::pair<std::string, std::string>> stored_response_path(std::string_view path) {
  constexpr std::string_view kMark = "/responses/";
  const auto at = path.rfind(kMark);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = path.substr(at + kMark.size());
  std::string_view part;
  if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
    part = rest.substr(slash);
    rest = rest.substr(0, slash);
  }
  // "…/responses/{id}/cancel" has a later "/responses/" only if the id is
  // literally "responses"; ids never are.
  if (rest.empty() || (!part.empty() && part != "/input_items" && part != "/cancel"))
    return std::nullopt;
  return std::make_pair(std::string(rest), std::string(part));
}

}  // namespace

struct SimServer::Impl {
  explicit Impl(SimOptions o)
      : options(std::move(o)),
        tokens(options.tokens),
        default_profile(options.default_profile),
        profiles(options.profiles.begin(), options.profiles.end()) {
    options.profiles.clear();
    if (options.threads == 0) options.threads = 1;
  }

  // Azure mode: the deployment a chat target names
  // (/openai/deployments/{deployment}/chat/completions?api-version=V), or
  // none for any other target (and always none outside Azure mode).
  std::optional<std::string> azure_deployment(std::string_view target) const {
    if (options.azure_api_version.empty()) return std::nullopt;
    constexpr std::string_view kPrefix = "/openai/deployments/";
    constexpr std::string_view kSuffix = "/chat/completions";
    const auto q = target.find('?');
    const std::string_view path = target.substr(0, q);
    if (!path.starts_with(kPrefix) || !ends_with(path, kSuffix)) return std::nullopt;
    const std::string_view name =
        path.substr(kPrefix.size(), path.size() - kPrefix.size() - kSuffix.size());
    if (name.empty() || name.find('/') != std::string_view::npos) return std::nullopt;
    // api-version=V among the query's parameters.
    std::string_view query = q == std::string_view::npos ? "" : target.substr(q + 1);
    const std::string wanted = "api-version=" + options.azure_api_version;
    while (!query.empty()) {
      const auto amp = query.find('&');
      if (query.substr(0, amp) == wanted) return percent_decode(name);
      if (amp == std::string_view::npos) break;
      query.remove_prefix(amp + 1);
    }
    return std::nullopt;
  }

  // --- shared state -------------------------------------------------------
  Profile profile_for(const std::string& model) const {
    std::lock_guard lk(profiles_mu);
    auto it = profiles.find(model);
    return it != profiles.end() ? it->second : default_profile;
  }

  void record(const Request& req) {
    RecordedRequest r;
    for (const auto& field : req) {
      auto [it, inserted] = r.headers.emplace(to_lower(field.name_string()), field.value());
      if (!inserted) (it->second += ", ") += field.value();
    }
    r.target = req.target();
    r.body = req.body();
    std::lock_guard lk(last_mu);
    last = std::move(r);
  }

  SimStats snapshot() const {
    SimStats s;
    s.requests = requests.load();
    s.streams_completed = streams_completed.load();
    s.streams_aborted = streams_aborted.load();
    s.in_flight = in_flight.load();
    s.max_in_flight = max_in_flight.load();
    s.errors_injected = errors_injected.load();
    s.streams_cut = streams_cut.load();
    s.streams_errored = streams_errored.load();
    s.connections_accepted = connections_accepted.load();
    s.signatures_refused = signatures_refused.load();
    s.tokens = tokens.stats();
    return s;
  }

  // Anthropic: the key in x-api-key.
  std::optional<ApiError> check_anthropic_auth(const Request& req) const {
    if (options.api_key.empty()) return std::nullopt;
    auto it = req.find("x-api-key");
    if (it != req.end() && it->value() == options.api_key) return std::nullopt;
    return ApiError{401, it == req.end() ? "x-api-key header is required" : "invalid x-api-key",
                    "authentication_error", std::nullopt, std::nullopt};
  }

  // Gemini: the key in x-goog-api-key or ?key=. Google answers a missing key
  // with 403 PERMISSION_DENIED and a wrong one with 400 INVALID_ARGUMENT.
  std::optional<ApiError> check_gemini_auth(const Request& req, const GeminiTarget& t) const {
    if (options.api_key.empty()) return std::nullopt;
    auto it = req.find("x-goog-api-key");
    std::optional<std::string> key = t.key;
    if (it != req.end()) key = std::string(it->value());
    if (key == options.api_key) return std::nullopt;
    if (!key) {
      return gemini_error(403,
                          "Method doesn't allow unregistered callers (callers without established "
                          "identity). Please use API Key or other form of API consumer identity "
                          "to call this API.");
    }
    ApiError e = gemini_error(400, "API key not valid. Please pass a valid API key.");
    e.code = "API_KEY_INVALID";
    return e;
  }

  std::optional<ApiError> check_auth(const Request& req) const {
    if (options.api_key.empty()) return std::nullopt;
    if (!options.azure_api_version.empty()) {
      auto it = req.find("api-key");
      if (it != req.end() && it->value() == options.api_key) return std::nullopt;
      return ApiError{401,
                      "Access denied due to invalid subscription key or wrong API endpoint. Make "
                      "sure to provide a valid key for an active subscription and use a correct "
                      "regional API endpoint for your resource. (simulated)",
                      "", std::nullopt, std::string("401")};
    }
    auto it = req.find(http::field::authorization);
    if (it != req.end() && it->value() == "Bearer " + options.api_key) return std::nullopt;
    ApiError e = injected_error(401);
    e.message = it == req.end()
                    ? "You didn't provide an API key. Send it as 'Authorization: Bearer <key>'."
                    : "Incorrect API key provided.";
    return e;
  }

  // --- HTTP ---------------------------------------------------------------
  net::awaitable<void> accept_loop(tcp::acceptor acceptor);
  net::awaitable<void> serve_connection(Shard& shard, tcp::socket socket);
  net::awaitable<bool> handle(Shard& shard, beast::tcp_stream& stream, beast::flat_buffer& buffer,
                              const Request& req);
  net::awaitable<bool> handle_chat(Shard& shard, beast::tcp_stream& stream,
                                   beast::flat_buffer& buffer, const Request& req);
  net::awaitable<bool> handle_openai_api(Shard& shard, beast::tcp_stream& stream,
                                         beast::flat_buffer& buffer, const Request& req,
                                         OpenAiApi api);
  // `vertex_model`: Anthropic on Vertex AI (.../publishers/anthropic/models/
  // {model}:rawPredict, :streamRawPredict): the model from the path, the
  // version in the body ("anthropic_version": "vertex-2023-10-16"), no
  // "model" member.
  net::awaitable<bool> handle_messages(Shard& shard, beast::tcp_stream& stream,
                                       beast::flat_buffer& buffer, const Request& req,
                                       std::optional<std::string> vertex_model = std::nullopt);
  // POST …/messages/count_tokens: the prompt's tokens as the sim counts them.
  Response count_tokens(const Request& req);
  net::awaitable<bool> handle_converse(Shard& shard, beast::tcp_stream& stream,
                                       beast::flat_buffer& buffer, const Request& req,
                                       ConverseTarget target);
  net::awaitable<bool> handle_generate(Shard& shard, beast::tcp_stream& stream,
                                       beast::flat_buffer& buffer, const Request& req,
                                       GeminiTarget target);
  // Plans a validated request and answers it, whatever its protocol.
  net::awaitable<bool> serve(Shard& shard, beast::tcp_stream& stream, beast::flat_buffer& buffer,
                             const Request& req, Exchange& ex);
  Response answer_at_once(const Request& req, std::string_view path);  // all but model calls
  Response handle_admin(const Request& req, std::string_view path);
  Response handle_models(const Request& req);
  static net::awaitable<Outcome> stream_answer(beast::tcp_stream& stream, const Exchange& ex);
  static net::awaitable<Outcome> answer_once(beast::tcp_stream& stream, const Exchange& ex);
  void count(Outcome outcome);
  // A Responses API answer the provider keeps (store): remembered for later
  // GETs. A background one is answered at once: the "queued" response.
  std::optional<Response> store_response(const Exchange& ex);
  Response answer_stored(const Request& req, const std::string& id, std::string_view part);
  ResponseStore response_store;

  // --- lifecycle ----------------------------------------------------------
  void launch();  // bind, listen, start the acceptor (lifecycle_mu held)

  SimOptions options;  // profiles moved out below
  TokenIssuer tokens;

  mutable std::mutex profiles_mu;
  Profile default_profile;
  std::map<std::string, Profile, std::less<>> profiles;

  mutable std::mutex last_mu;
  std::optional<RecordedRequest> last;

  std::atomic<std::uint64_t> requests{0};
  std::atomic<std::uint64_t> streams_completed{0};
  std::atomic<std::uint64_t> streams_aborted{0};
  std::atomic<std::uint64_t> streams_cut{0};
  std::atomic<std::uint64_t> streams_errored{0};
  std::atomic<std::uint64_t> in_flight{0};
  std::atomic<std::uint64_t> max_in_flight{0};
  std::atomic<std::uint64_t> errors_injected{0};
  std::atomic<std::uint64_t> signatures_refused{0};
  std::atomic<std::uint64_t> connections_accepted{0};
  std::atomic<std::uint64_t> next_id{0};
  std::atomic<std::uint16_t> bound_port{0};

  // Profile::prefix_cache: the prompt prefixes this process has read, each
  // with when it was last used (shared by every model it serves, as the
  // hashes include the messages, not the model: close enough for a
  // simulator). Bounded: expired entries are swept when it grows.
  std::mutex prefix_mu;
  std::unordered_map<std::uint64_t, std::chrono::steady_clock::time_point> prefix_cache;
  static constexpr std::size_t kMaxPrefixes = 200'000;

  // The tokens of the longest cached prefix of `chat` (0: none), and every
  // prefix of it cached from now on.
  std::int64_t read_prefix_cache(const ChatRequest& chat, const Profile& profile) {
    if (!profile.prefix_cache || chat.prefixes.empty()) return 0;
    const auto now = std::chrono::steady_clock::now();
    const auto ttl = std::chrono::milliseconds(profile.prefix_cache_ttl_ms);
    std::lock_guard lock(prefix_mu);
    std::int64_t cached = 0;
    for (auto it = chat.prefixes.rbegin(); it != chat.prefixes.rend(); ++it) {
      auto hit = prefix_cache.find(it->first);
      if (hit != prefix_cache.end() && now - hit->second < ttl) {
        cached = it->second;
        break;
      }
    }
    if (prefix_cache.size() >= kMaxPrefixes) {
      std::erase_if(prefix_cache, [&](const auto& e) { return now - e.second >= ttl; });
      if (prefix_cache.size() >= kMaxPrefixes) prefix_cache.clear();
    }
    for (const auto& [hash, tokens] : chat.prefixes) {
      if (tokens >= profile.prefix_cache_min_tokens) prefix_cache[hash] = now;
    }
    return cached >= profile.prefix_cache_min_tokens ? cached : 0;
  }

  std::mutex lifecycle_mu;
  std::condition_variable caller_done;
  bool started = false;
  bool stopped = false;
  bool caller_running = false;  // run() is inside shards[0]->ioc.run()
  std::vector<std::thread> threads;
  // Declared last so it is destroyed first: tearing down the io_contexts
  // destroys suspended coroutines, whose guards still touch the counters above.
  std::vector<std::unique_ptr<Shard>> shards;
};

namespace {

void log_exception(std::exception_ptr e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    std::fprintf(stderr, "llmgate-sim: connection failed: %s\n", x.what());
  }
}

}  // namespace

net::awaitable<void> SimServer::Impl::accept_loop(tcp::acceptor acceptor) {
  co_await net::this_coro::throw_if_cancelled(false);
  std::size_t next = 0;
  for (;;) {
    Shard& shard = *shards[next++ % shards.size()];
    auto [ec, socket] = co_await acceptor.async_accept(shard.ioc, use_tuple);
    if (ec == net::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) {
      // Out of descriptors and the like: back off instead of spinning.
      std::fprintf(stderr, "llmgate-sim: accept: %s\n", ec.message().c_str());
      net::steady_timer pause(acceptor.get_executor(), 50ms);
      co_await pause.async_wait(use_tuple);
      continue;
    }
    connections_accepted.fetch_add(1);
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);  // each event leaves at once
    net::co_spawn(shard.ioc, serve_connection(shard, std::move(socket)), log_exception);
  }
}

net::awaitable<void> SimServer::Impl::serve_connection(Shard& shard, tcp::socket socket) {
  co_await net::this_coro::throw_if_cancelled(false);
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(kHeaderLimit);
    parser.body_limit(kBodyLimit);
    stream.expires_after(kReadTimeout);
    auto [ec, n] = co_await http::async_read_header(stream, buffer, parser, use_tuple);
    if (!ec && parser.get()[http::field::expect] == "100-continue") {
      // curl waits a second for this before sending a large body.
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      auto [wec, wn] = co_await net::async_write(stream, net::buffer(kContinue), use_tuple);
      ec = wec;
    }
    if (!ec) std::tie(ec, n) = co_await http::async_read(stream, buffer, parser, use_tuple);

    if (ec == http::error::end_of_stream) break;
    if (ec) {
      std::optional<ApiError> reply;
      if (ec == http::error::body_limit) {
        reply = ApiError{413, "Request body too large (limit 1 MiB).", "invalid_request_error",
                         std::nullopt, std::nullopt};
      } else if (ec == http::error::header_limit) {
        reply = ApiError{431, "Request headers too large.", "invalid_request_error", std::nullopt,
                         std::nullopt};
      } else if (ec.category() == http::make_error_code(http::error::bad_target).category()) {
        reply = ApiError{400, "Malformed HTTP request: " + ec.message(), "invalid_request_error",
                         std::nullopt, std::nullopt};
      }
      if (reply) {
        Request unparsed{http::verb::unknown, "", 11};  // shapes the reply: 1.1, close
        unparsed.keep_alive(false);
        Response res = make_error(unparsed, *reply);
        co_await write_response(stream, std::move(res));
      }
      break;
    }
    const Request req = parser.release();
    if (!co_await handle(shard, stream, buffer, req)) break;
  }
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream.close();
}

net::awaitable<bool> SimServer::Impl::handle(Shard& shard, beast::tcp_stream& stream,
                                             beast::flat_buffer& buffer, const Request& req) {
  const std::string_view target = req.target();
  const std::string_view path = target.substr(0, target.find('?'));
  if (!options.azure_api_version.empty() && is_chat_path(path)) {
    if (!azure_deployment(target)) {
      Response missing = make_error(
          req, ApiError{404, "Resource not found", "", std::nullopt, std::string("404")});
      co_return co_await write_response(stream, std::move(missing));
    }
  }
  const auto header = [&](std::string_view name) { return std::string(req[name]); };
  if (auto token = tokens.handle(req.method_string(), target, header, req.body(),
                                 std::chrono::system_clock::now())) {
    Response res = make_response(req.version(), req.keep_alive(), token->status,
                                 std::move(token->body), token->content_type);
    co_return co_await write_response(stream, std::move(res));
  }
  // Tokens required: every model request carries a live one (Bedrock's are
  // signed instead).
  if (tokens.required() && path != "/healthz" && !path.starts_with("/admin/") &&
      !converse_target(path)) {
    if (auto why = tokens.check_bearer(req[http::field::authorization],
                                       std::chrono::system_clock::now())) {
      requests.fetch_add(1);
      // (Vertex AI answers in Google's shape whatever the publisher.)
      const Protocol shape =
          parse_gemini_target(target) || vertex_anthropic_model(path) ? Protocol::kGemini
          : is_messages_path(path) || is_count_tokens_path(path)      ? Protocol::kAnthropic
                                                                      : Protocol::kOpenAI;
      ApiError e = shape == Protocol::kGemini
                       ? gemini_error(401, *why)
                       : ApiError{401, *why, "authentication_error", std::nullopt, std::nullopt};
      if (shape == Protocol::kGemini) e.type = "UNAUTHENTICATED";
      Response refused = make_protocol_error(req, shape, e);
      co_return co_await write_response(stream, std::move(refused));
    }
  }
  const bool post = req.method() == http::verb::post;
  if (is_chat_path(path) && post) {
    co_return co_await handle_chat(shard, stream, buffer, req);
  }
  if (auto gemini = parse_gemini_target(target); gemini && post) {
    co_return co_await handle_generate(shard, stream, buffer, req, std::move(*gemini));
  }
  if (auto converse = converse_target(path); converse && post) {
    co_return co_await handle_converse(shard, stream, buffer, req, std::move(*converse));
  }
  if (is_messages_path(path) && post) {
    co_return co_await handle_messages(shard, stream, buffer, req);
  }
  if (auto model = vertex_anthropic_model(path); model && post) {
    co_return co_await handle_messages(shard, stream, buffer, req, std::move(*model));
  }
  if (is_count_tokens_path(path) && post) {
    Response res = count_tokens(req);
    co_return co_await write_response(stream, std::move(res));
  }
  if (auto api = openai_api_path(path); api && post) {
    co_return co_await handle_openai_api(shard, stream, buffer, req, *api);
  }
  if (auto stored = stored_response_path(path)) {
    Response res = answer_stored(req, stored->first, stored->second);
    co_return co_await write_response(stream, std::move(res));
  }
  // A named local, not a temporary inside the co_await expression: GCC 12
  // has bugs destroying such temporaries across a suspension.
  Response res = answer_at_once(req, path);
  co_return co_await write_response(stream, std::move(res));
}

Response SimServer::Impl::answer_at_once(const Request& req, std::string_view path) {
  if (is_chat_path(path) || openai_api_path(path)) return make_error(req, method_not_allowed(req));
  if (parse_gemini_target(req.target())) {
    return make_protocol_error(req, Protocol::kGemini, gemini_error(404, "Method not found."));
  }
  if (is_messages_path(path)) {
    return make_protocol_error(
        req, Protocol::kAnthropic,
        ApiError{405, "Method Not Allowed", "invalid_request_error", std::nullopt, std::nullopt});
  }
  if (path == "/healthz") return make_response(req, http::status::ok, R"({"status":"ok"})");
  if (path.starts_with("/admin/")) return handle_admin(req, path);
  if (path == "/models" || ends_with(path, "/models")) return handle_models(req);
  return make_error(req, not_found(req));
}

net::awaitable<bool> SimServer::Impl::handle_chat(Shard& shard, beast::tcp_stream& stream,
                                                  beast::flat_buffer& buffer, const Request& req) {
  Exchange ex;
  ex.received = Clock::now();
  requests.fetch_add(1);
  record(req);
  if (auto e = check_auth(req)) {
    // A named local, not a temporary in the co_await (GCC 12 destroys those twice).
    Response refused = make_error(req, *e);
    co_return co_await write_response(stream, std::move(refused));
  }

  auto parsed = parse_chat_request(req.body());
  if (auto* e = std::get_if<ApiError>(&parsed)) {
    Response refused = make_error(req, *e);
    co_return co_await write_response(stream, std::move(refused));
  }
  ex.chat = std::move(std::get<ChatRequest>(parsed));
  // Azure serves the deployment the path names, whatever the body says.
  if (auto deployment = azure_deployment(req.target())) ex.chat.model = std::move(*deployment);
  ex.azure = !options.azure_api_version.empty();
  ex.profile = profile_for(ex.chat.model);
  if (ex.profile.reject_stream_options && ex.chat.has_stream_options) {
    Response refused = make_error(req, stream_options_refused());
    co_return co_await write_response(stream, std::move(refused));
  }
  if (ex.profile.reject_stream && ex.chat.stream) {
    Response refused = make_error(req, stream_refused());
    co_return co_await write_response(stream, std::move(refused));
  }
  co_return co_await serve(shard, stream, buffer, req, ex);
}

net::awaitable<bool> SimServer::Impl::handle_openai_api(Shard& shard, beast::tcp_stream& stream,
                                                        beast::flat_buffer& buffer,
                                                        const Request& req, OpenAiApi api) {
  Exchange ex;
  ex.received = Clock::now();
  ex.api = api;
  requests.fetch_add(1);
  record(req);
  if (auto e = check_auth(req)) {
    // A named local, not a temporary in the co_await (GCC 12 destroys those twice).
    Response refused = make_error(req, *e);
    co_return co_await write_response(stream, std::move(refused));
  }
  std::variant<ChatRequest, ApiError> parsed = ApiError{};
  if (api == OpenAiApi::kEmbeddings) {
    auto e = parse_embeddings_request(req.body());
    if (auto* err = std::get_if<ApiError>(&e)) {
      parsed = *err;
    } else {
      ex.embeddings = std::move(std::get<EmbeddingsRequest>(e));
      ChatRequest chat;
      chat.model = ex.embeddings.model;
      chat.prompt_tokens = ex.embeddings.prompt_tokens;
      parsed = std::move(chat);
    }
  } else {
    parsed = api == OpenAiApi::kResponses ? parse_responses_request(req.body())
                                          : parse_completions_request(req.body());
  }
  if (auto* e = std::get_if<ApiError>(&parsed)) {
    Response refused = make_error(req, *e);
    co_return co_await write_response(stream, std::move(refused));
  }
  ex.chat = std::move(std::get<ChatRequest>(parsed));
  if (api == OpenAiApi::kResponses) ex.responses = responses_options(req.body());
  ex.profile = profile_for(ex.chat.model);
  co_return co_await serve(shard, stream, buffer, req, ex);
}

net::awaitable<bool> SimServer::Impl::handle_messages(Shard& shard, beast::tcp_stream& stream,
                                                      beast::flat_buffer& buffer,
                                                      const Request& req,
                                                      std::optional<std::string> vertex_model) {
  Exchange ex;
  ex.received = Clock::now();
  ex.protocol = Protocol::kAnthropic;
  requests.fetch_add(1);
  record(req);
  // Anthropic puts a request id in every answer, errors included.
  ex.number = next_id.fetch_add(1) + 1;
  ex.request_id = "req_sim_" + std::to_string(ex.number);
  std::optional<ApiError> refused;
  std::string vertex_body;
  if (vertex_model) {
    // Vertex AI: the version in the body, the model only in the path.
    json doc = json::parse(req.body(), nullptr, false);
    if (!doc.is_object() || doc.value("anthropic_version", "") != "vertex-2023-10-16") {
      refused = ApiError{400, "anthropic_version: Input should be 'vertex-2023-10-16'",
                         "invalid_request_error", std::nullopt, std::nullopt};
    } else if (doc.contains("model")) {
      refused = ApiError{400, "model: Extra inputs are not permitted", "invalid_request_error",
                         std::nullopt, std::nullopt};
    } else {
      doc.erase("anthropic_version");
      doc["model"] = *vertex_model;
      vertex_body = doc.dump();
    }
  } else {
    refused = check_anthropic_auth(req);
    if (!refused && req.find("anthropic-version") == req.end()) {
      refused = ApiError{400, "anthropic-version: header is required", "invalid_request_error",
                         std::nullopt, std::nullopt};
    }
  }
  auto parsed = parse_messages_request(vertex_model ? vertex_body : req.body());
  if (!refused) {
    if (auto* e = std::get_if<ApiError>(&parsed)) refused = *e;
  }
  if (refused) {
    Response res = make_protocol_error(req, Protocol::kAnthropic, *refused, ex.request_id);
    co_return co_await write_response(stream, std::move(res));
  }
  ex.chat = std::move(std::get<ChatRequest>(parsed));
  ex.profile = profile_for(ex.chat.model);
  co_return co_await serve(shard, stream, buffer, req, ex);
}

Response SimServer::Impl::count_tokens(const Request& req) {
  requests.fetch_add(1);
  record(req);
  const std::string request_id = "req_sim_" + std::to_string(next_id.fetch_add(1) + 1);
  std::optional<ApiError> refused = check_anthropic_auth(req);
  if (!refused && req.find("anthropic-version") == req.end()) {
    refused = ApiError{400, "anthropic-version: header is required", "invalid_request_error",
                       std::nullopt, std::nullopt};
  }
  // A Messages request without max_tokens (which Anthropic refuses here).
  json body = json::parse(req.body(), nullptr, false);
  if (!refused && body.is_object() && body.contains("max_tokens")) {
    refused = ApiError{400, "max_tokens: Extra inputs are not permitted", "invalid_request_error",
                       std::nullopt, std::nullopt};
  }
  if (!refused && body.is_object()) body["max_tokens"] = 1;
  auto parsed = parse_messages_request(body.is_object() ? body.dump() : req.body());
  if (!refused) {
    if (auto* e = std::get_if<ApiError>(&parsed)) refused = *e;
  }
  if (refused) return make_protocol_error(req, Protocol::kAnthropic, *refused, request_id);
  const json counted = {{"input_tokens", std::get<ChatRequest>(parsed).prompt_tokens}};
  return make_response(req, http::status::ok, counted.dump());
}

net::awaitable<bool> SimServer::Impl::handle_generate(Shard& shard, beast::tcp_stream& stream,
                                                      beast::flat_buffer& buffer,
                                                      const Request& req, GeminiTarget target) {
  Exchange ex;
  ex.received = Clock::now();
  ex.protocol = Protocol::kGemini;
  ex.sse = target.sse;
  requests.fetch_add(1);
  record(req);
  std::optional<ApiError> refused = check_gemini_auth(req, target);
  auto parsed = parse_generate_request(req.body(), target);
  if (!refused) {
    if (auto* e = std::get_if<ApiError>(&parsed)) refused = *e;
  }
  if (refused) {
    Response res = make_protocol_error(req, Protocol::kGemini, *refused);
    co_return co_await write_response(stream, std::move(res));
  }
  ex.chat = std::move(std::get<ChatRequest>(parsed));
  ex.profile = profile_for(ex.chat.model);
  co_return co_await serve(shard, stream, buffer, req, ex);
}

net::awaitable<bool> SimServer::Impl::handle_converse(Shard& shard, beast::tcp_stream& stream,
                                                      beast::flat_buffer& buffer,
                                                      const Request& req, ConverseTarget target) {
  Exchange ex;
  ex.received = Clock::now();
  ex.protocol = Protocol::kBedrock;
  requests.fetch_add(1);
  record(req);
  std::optional<ApiError> refused;
  // Signed with temporary credentials STS issued here (web identity), with
  // their session token; else with --aws-key's.
  const std::string_view authorization = req[http::field::authorization];
  const std::size_t cred = authorization.find("Credential=");
  const std::string_view key_id =
      cred == std::string_view::npos
          ? std::string_view()
          : authorization.substr(cred + 11, authorization.find('/', cred) - cred - 11);
  std::optional<AwsKey> key;
  if (auto temporary = tokens.aws_temporary(key_id, std::chrono::system_clock::now())) {
    key = AwsKey{std::string(key_id), temporary->secret, temporary->session_token};
  } else if (!options.aws_access_key_id.empty()) {
    key = AwsKey{options.aws_access_key_id, options.aws_secret_access_key, {}};
  }
  if (key) {
    refused = check_sigv4(
        std::string_view(req.method_string()), req.target(), req.body(),
        [&](std::string_view name) { return std::string(req[name]); }, *key);
    if (refused) signatures_refused.fetch_add(1);
  }
  auto parsed = parse_converse_request(req.body(), target);
  if (!refused) {
    if (auto* e = std::get_if<ApiError>(&parsed)) refused = *e;
  }
  if (refused) {
    Response res = make_protocol_error(req, Protocol::kBedrock, *refused);
    co_return co_await write_response(stream, std::move(res));
  }
  ex.chat = std::move(std::get<ChatRequest>(parsed));
  ex.profile = profile_for(ex.chat.model);
  co_return co_await serve(shard, stream, buffer, req, ex);
}

net::awaitable<bool> SimServer::Impl::serve(Shard& shard, beast::tcp_stream& stream,
                                            beast::flat_buffer& buffer, const Request& req,
                                            Exchange& ex) {
  ex.region = ex.profile.region.empty() ? options.region : ex.profile.region;
  ex.stamp = options.stamp_events;
  if (const std::int64_t cached = read_prefix_cache(ex.chat, ex.profile); cached > 0) {
    ex.profile.cached_tokens = std::max(ex.profile.cached_tokens,
                                        static_cast<int>(std::min<std::int64_t>(cached, 1 << 30)));
  }
  ex.plan = plan_chat(ex.chat, ex.profile, shard.rng);
  if (!ex.plan.faults) ex.profile = without_faults(std::move(ex.profile));
  if (ex.chat.prefill && !ex.profile.refuse_prefill) continue_after(ex.plan, *ex.chat.prefill);
  if (ex.api != OpenAiApi::kChat) {
    // Responses carry reasoning and function calls; legacy completions and
    // embeddings only text (or nothing).
    const bool call =
        ex.api == OpenAiApi::kResponses && ex.plan.output == Profile::Output::kToolCall;
    ex.plan.output = call ? Profile::Output::kToolCall : Profile::Output::kText;
    ex.plan.annotations = false;
    if (ex.api != OpenAiApi::kResponses) ex.plan.reasoning_tokens = 0;
    if (ex.api == OpenAiApi::kEmbeddings) ex.plan.completion_tokens = 0;
  }
  if (ex.number == 0) ex.number = next_id.fetch_add(1) + 1;
  const std::string n = std::to_string(ex.number);
  switch (ex.protocol) {
    case Protocol::kOpenAI:
      ex.id = ex.api == OpenAiApi::kResponses     ? "resp_sim_" + n
              : ex.api == OpenAiApi::kCompletions ? "cmpl-sim-" + n
                                                  : "chatcmpl-sim-" + n;
      ex.call_id = "call_sim_" + n;
      break;
    case Protocol::kAnthropic:
      ex.id = "msg_sim_" + n;
      ex.call_id = "toolu_sim_" + n;
      break;
    case Protocol::kGemini:
      ex.id = "resp-sim-" + n;
      ex.call_id = "call_sim_" + n;
      break;
    case Protocol::kBedrock:
      ex.id = "bedrock-sim-" + n;
      ex.call_id = "tooluse_sim_" + n;
      break;
  }
  ex.request_id = "req_sim_" + n;
  ex.created = unix_now();
  ex.version = req.version();
  ex.keep_alive = req.keep_alive();

  InFlight guard(in_flight, max_in_flight);
  if (ex.plan.context_exceeded) {
    const int kind = ex.protocol == Protocol::kAnthropic ? 1
                     : ex.protocol == Protocol::kGemini  ? 2
                                                         : 0;
    const ApiError e =
        ex.protocol == Protocol::kBedrock
            ? ApiError{400,
                       "Input is too long for requested model: " +
                           std::to_string(ex.chat.prompt_tokens) + " tokens > " +
                           std::to_string(ex.profile.context_window) + ". (simulated)",
                       "ValidationException", std::nullopt, std::nullopt}
            : context_length_error(kind, ex.chat.prompt_tokens, ex.profile.context_window);
    Response res = make_protocol_error(ex.version, ex.keep_alive, ex.protocol, e, ex.request_id);
    co_return co_await write_response(stream, std::move(res));
  }
  if (ex.chat.prefill && ex.profile.refuse_prefill) {
    Response res = make_protocol_error(ex.version, ex.keep_alive, ex.protocol,
                                       prefill_refused(ex.protocol), ex.request_id);
    co_return co_await write_response(stream, std::move(res));
  }
  if (ex.plan.inject_error) {
    errors_injected.fetch_add(1);
    const ApiError e =
        ex.protocol == Protocol::kAnthropic ? anthropic_injected_error(ex.profile.error_status)
        : ex.protocol == Protocol::kGemini  ? gemini_injected_error(ex.profile.error_status)
        : ex.protocol == Protocol::kBedrock ? bedrock_injected_error(ex.profile.error_status)
                                            : injected_error(ex.profile.error_status);
    Response res = make_protocol_error(ex.version, ex.keep_alive, ex.protocol, e, ex.request_id,
                                       ex.profile.retry_after_s);
    if (!ex.region.empty()) res.set("x-sim-region", ex.region);
    co_return co_await write_response(stream, std::move(res));
  }

  if (ex.api == OpenAiApi::kResponses && ex.protocol == Protocol::kOpenAI) {
    if (std::optional<Response> queued = store_response(ex)) {
      co_return co_await write_response(stream, std::move(*queued));
    }
  }
  auto respond = ex.chat.stream ? stream_answer(stream, ex) : answer_once(stream, ex);
  auto result = co_await (std::move(respond) || watch_for_hangup(stream.socket(), buffer));
  const Outcome outcome = result.index() == 0 ? std::get<0>(result) : Outcome::kClientGone;
  count(outcome);
  // An HTTP/1.0 stream is delimited by the close (no chunked encoding). An
  // in-band error ends a whole, well-framed response.
  const bool whole = outcome == Outcome::kCompleted || outcome == Outcome::kErrored;
  co_return whole&& ex.keep_alive && (ex.version >= 11 || !ex.chat.stream);
}

void SimServer::Impl::count(Outcome outcome) {
  switch (outcome) {
    case Outcome::kCompleted:
      streams_completed.fetch_add(1);
      break;
    case Outcome::kClientGone:
      streams_aborted.fetch_add(1);
      break;
    case Outcome::kCut:
      streams_cut.fetch_add(1);
      break;
    case Outcome::kErrored:
      streams_errored.fetch_add(1);
      break;
  }
}

namespace {

// OpenAI's rate-limit headers (docs: "Rate limits"), with numbers that say
// plenty is left, and its processing time.
template <class Fields>
void set_ratelimit_headers(Fields& res, double processing_ms) {
  res.set("x-ratelimit-limit-requests", "10000");
  res.set("x-ratelimit-remaining-requests", "9999");
  res.set("x-ratelimit-reset-requests", "6ms");
  res.set("x-ratelimit-limit-tokens", "1000000");
  res.set("x-ratelimit-remaining-tokens", "999000");
  res.set("x-ratelimit-reset-tokens", "60ms");
  res.set("openai-processing-ms", std::to_string(static_cast<long>(processing_ms)));
}

// Anthropic's (docs: "Rate limits", response headers): limits, what is left,
// and when it is back in full, as RFC 3339.
template <class Fields>
void set_anthropic_ratelimit_headers(Fields& res) {
  const std::string reset = config::format_rfc3339_utc(std::chrono::system_clock::now() + 1s);
  for (const auto& [kind, limit, remaining] :
       {std::tuple{"requests", "4000", "3999"}, std::tuple{"tokens", "400000", "399000"},
        std::tuple{"input-tokens", "200000", "199000"},
        std::tuple{"output-tokens", "80000", "79000"}}) {
    const std::string prefix = std::string("anthropic-ratelimit-") + kind;
    res.set(prefix + "-limit", limit);
    res.set(prefix + "-remaining", remaining);
    res.set(prefix + "-reset", reset);
  }
}

// The headers of a 200 answer as each vendor sends them: content type, its
// request id header, rate limit headers when the profile asks.
template <class Fields>
void set_answer_headers(Fields& res, const Exchange& ex, bool streamed) {
  res.set(http::field::server, "llmgate-sim");
  switch (ex.protocol) {
    case Protocol::kOpenAI:
      res.set(http::field::content_type, streamed ? "text/event-stream" : "application/json");
      if (streamed) res.set(http::field::cache_control, "no-cache");
      res.set("x-request-id", ex.request_id);
      if (ex.profile.ratelimit_headers) set_ratelimit_headers(res, ex.plan.ttft_ms);
      break;
    case Protocol::kAnthropic:
      res.set(http::field::content_type,
              streamed ? "text/event-stream; charset=utf-8" : "application/json");
      if (streamed) res.set(http::field::cache_control, "no-cache");
      res.set("request-id", ex.request_id);
      if (ex.profile.ratelimit_headers) set_anthropic_ratelimit_headers(res);
      break;
    case Protocol::kGemini:
      // Google streams SSE as an attachment; the JSON array is plain JSON.
      res.set(http::field::content_type, streamed && ex.sse ? "text/event-stream" : kGoogleJson);
      if (streamed && ex.sse) res.set(http::field::content_disposition, "attachment");
      break;
    case Protocol::kBedrock:
      res.set(http::field::content_type,
              streamed ? "application/vnd.amazon.eventstream" : "application/json");
      res.set("x-amzn-RequestId", ex.request_id);
      break;
  }
  if (!ex.region.empty()) res.set("x-sim-region", ex.region);
}

std::unique_ptr<EventStream> make_event_stream(const Exchange& ex) {
  Answer answer(ex.plan, ex.call_id);
  switch (ex.protocol) {
    case Protocol::kAnthropic:
      return std::make_unique<AnthropicFormatter>(ex.id, ex.chat.model, std::move(answer),
                                                  anthropic_stop_reason(ex.plan),
                                                  ex.chat.prompt_tokens, ex.plan.cached_tokens);
    case Protocol::kGemini:
      return std::make_unique<GeminiFormatter>(ex.id, ex.chat.model, std::move(answer),
                                               ex.plan.capped, ex.chat.prompt_tokens,
                                               ex.plan.cached_tokens, ex.sse);
    case Protocol::kBedrock:
      return std::make_unique<BedrockFormatter>(std::move(answer), ex.plan.capped,
                                                ex.chat.prompt_tokens, ex.plan.cached_tokens);
    case Protocol::kOpenAI:
      break;
  }
  if (ex.api == OpenAiApi::kResponses) {
    return std::make_unique<ResponsesStream>(ex.id, ex.created, ex.chat.model, std::move(answer),
                                             ex.plan.capped, ex.chat.prompt_tokens,
                                             ex.plan.cached_tokens);
  }
  if (ex.api == OpenAiApi::kCompletions) {
    return std::make_unique<CompletionsStream>(ex.id, ex.created, ex.chat.model, std::move(answer),
                                               ex.plan.finish_reason(), ex.chat.include_usage,
                                               ex.chat.prompt_tokens);
  }
  OpenAIStream::Options o;
  o.include_usage = ex.chat.include_usage;
  o.azure = ex.azure;
  o.prompt_tokens = ex.chat.prompt_tokens;
  o.cached_tokens = ex.plan.cached_tokens;
  o.finish_reason = ex.plan.finish_reason();
  return std::make_unique<OpenAIStream>(ex.id, ex.created, ex.chat.model, std::move(answer), o);
}

// The body of a non-streamed answer.
std::string answer_body(const Exchange& ex) {
  const Answer answer(ex.plan, ex.call_id);
  switch (ex.protocol) {
    case Protocol::kAnthropic:
      return anthropic_message_body(ex.id, ex.chat.model, answer, anthropic_stop_reason(ex.plan),
                                    ex.chat.prompt_tokens, ex.plan.cached_tokens);
    case Protocol::kGemini:
      if (ex.profile.safety_block) {
        return gemini_blocked_body(ex.id, ex.chat.model, ex.chat.prompt_tokens);
      }
      return gemini_response_body(ex.id, ex.chat.model, answer, ex.plan.capped,
                                  ex.chat.prompt_tokens, ex.plan.cached_tokens);
    case Protocol::kBedrock:
      return converse_response_body(answer, ex.plan.capped, ex.chat.prompt_tokens,
                                    ex.plan.cached_tokens);
    case Protocol::kOpenAI:
      break;
  }
  switch (ex.api) {
    case OpenAiApi::kResponses:
      return responses_body(ex.id, ex.created, ex.chat.model, answer, ex.plan.capped,
                            ex.chat.prompt_tokens, ex.plan.cached_tokens);
    case OpenAiApi::kCompletions:
      return completions_body(ex.id, ex.created, ex.chat.model, answer, ex.plan.finish_reason(),
                              ex.chat.prompt_tokens);
    case OpenAiApi::kEmbeddings:
      return embeddings_body(ex.embeddings, ex.embeddings.dimensions > 0
                                                ? ex.embeddings.dimensions
                                                : ex.profile.embedding_dimensions);
    case OpenAiApi::kChat:
      break;
  }
  return completion_body(ex.id, ex.created, ex.chat.model, answer, ex.plan.finish_reason(),
                         ex.chat.prompt_tokens, ex.plan.cached_tokens);
}

// The end of a chunked body (nothing for HTTP/1.0, which the close ends).
net::awaitable<bool> end_body(beast::tcp_stream& stream, bool chunked) {
  if (!chunked) co_return true;
  stream.expires_after(kWriteTimeout);
  auto [ec, n] = co_await net::async_write(stream, net::buffer("0\r\n\r\n", 5), use_tuple);
  co_return !ec;
}

}  // namespace

std::optional<Response> SimServer::Impl::store_response(const Exchange& ex) {
  if (!ex.responses.store && !ex.responses.background) return std::nullopt;
  const std::string body = answer_body(ex);
  const double generation_ms = ex.plan.ttft_ms + 1000.0 * ex.plan.completion_tokens /
                                                     std::max(ex.plan.tokens_per_second, 1e-3);
  response_store.put(ex.id, ResponseStore::Stored{body, ex.responses.input_items,
                                                  ex.received + to_duration(generation_ms),
                                                  ex.responses.background});
  if (!ex.responses.background || ex.chat.stream) return std::nullopt;
  Response res =
      make_response(ex.version, ex.keep_alive, 200, queued_response(body), "application/json");
  set_answer_headers(res, ex, /*streamed=*/false);
  return res;
}

Response SimServer::Impl::answer_stored(const Request& req, const std::string& id,
                                        std::string_view part) {
  requests.fetch_add(1);
  record(req);
  if (auto e = check_auth(req)) return make_error(req, *e);
  const auto m = req.method();
  const bool allowed = part.empty()        ? m == http::verb::get || m == http::verb::delete_
                       : part == "/cancel" ? m == http::verb::post
                                           : m == http::verb::get;
  if (!allowed) return make_error(req, method_not_allowed(req));
  const std::string_view target = req.target();
  const bool stream =
      part.empty() && m == http::verb::get && target.find("stream=true") != std::string_view::npos;
  ResponseStore::Answer a =
      response_store.answer(std::string_view(req.method_string()), id, part, stream, Clock::now());
  return make_response(req, static_cast<http::status>(a.status), std::move(a.body),
                       a.event_stream ? "text/event-stream" : "application/json");
}

// Streams one answer: headers and the protocol's opening events at once
// (real providers send headers long before the first token), then one write
// per token on absolute deadlines, with the profile's faults at their token
// positions, then the protocol's closing events.
net::awaitable<Outcome> SimServer::Impl::stream_answer(beast::tcp_stream& stream,
                                                       const Exchange& ex) {
  co_await net::this_coro::throw_if_cancelled(false);
  const bool chunked = ex.version >= 11;
  http::response<http::empty_body> res{http::status::ok, ex.version};
  set_answer_headers(res, ex, /*streamed=*/true);
  res.keep_alive(ex.keep_alive && chunked);
  if (chunked) res.chunked(true);
  http::response_serializer<http::empty_body> serializer{res};
  stream.expires_after(kWriteTimeout);
  if (auto [ec, n] = co_await http::async_write_header(stream, serializer, use_tuple);
      ec || co_await cancelled()) {
    co_return Outcome::kClientGone;
  }

  const std::unique_ptr<EventStream> events = make_event_stream(ex);
  const Answer answer(ex.plan, ex.call_id);
  std::string event;  // reused for every event of the stream
  event.reserve(512);
  events->open(event);
  if (!event.empty() && !co_await write_event(stream, chunked, event)) {
    co_return Outcome::kClientGone;
  }

  const Profile& p = ex.profile;
  const int tokens = ex.plan.completion_tokens;
  const auto first_token_at =
      ex.received +
      to_duration(std::max(ex.plan.ttft_ms, static_cast<double>(p.stall_before_first_token_ms)));
  const double interval_ms = 1000.0 / ex.plan.tokens_per_second;
  Clock::duration stalled{0};
  net::steady_timer timer(co_await net::this_coro::executor);

  if (ex.protocol == Protocol::kGemini && p.safety_block) {
    // The prompt is refused as a whole: one response at first-token time.
    timer.expires_at(first_token_at);
    if (auto [ec] = co_await timer.async_wait(use_tuple); ec) co_return Outcome::kClientGone;
    GeminiFormatter format(ex.id, ex.chat.model, answer, false, ex.chat.prompt_tokens, 0, ex.sse);
    event.clear();
    format.blocked(event);
    if (!co_await write_event(stream, chunked, event) || !co_await end_body(stream, chunked)) {
      co_return Outcome::kClientGone;
    }
    co_return Outcome::kCompleted;
  }

  // Boundary k is the moment after k content tokens; boundary `tokens` is the
  // end of the content, so a fault placed there hits the finish events.
  for (int k = 0; k <= tokens; ++k) {
    if (k == p.malformed_after_tokens) {
      event.clear();
      events->malformed(event);
      if (!co_await write_event(stream, chunked, event)) co_return Outcome::kClientGone;
    }
    if (k == p.stall_after_tokens) stalled += std::chrono::milliseconds(p.stall_ms);

    const int slot = std::min(k, std::max(tokens - 1, 0));
    const auto due = first_token_at + to_duration(slot * interval_ms) + stalled;
    if (due > Clock::now()) {
      timer.expires_at(due);
      if (auto [ec] = co_await timer.async_wait(use_tuple); ec) co_return Outcome::kClientGone;
    }

    event.clear();
    if (k == p.cut_after_tokens) {
      events->truncated(event);
      co_await write_event(stream, chunked, event);
      co_return Outcome::kCut;
    }
    if (k == p.error_after_tokens) {
      events->error(event);
      if (!co_await write_event(stream, chunked, event) || !co_await end_body(stream, chunked)) {
        co_return Outcome::kClientGone;
      }
      co_return Outcome::kErrored;
    }
    if (k == tokens) break;
    if (!answer.sent(k)) continue;  // hidden reasoning: thinking time, nothing on the wire
    events->token(event, k);
    if (event.empty()) continue;  // a Gemini tool call: the call comes whole at the end
    if (ex.stamp && event.starts_with("data: {")) {
      const auto ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
              .count();
      // Last in the object, where OpenAI puts its own per-chunk field
      // (`obfuscation`): the members before "choices" stay the same from
      // chunk to chunk, as a provider's do.
      if (const auto close = event.rfind('}'); close != std::string::npos)
        event.insert(close, ",\"x_sim_ns\":" + std::to_string(ns));
    }
    if (!co_await write_event(stream, chunked, event)) co_return Outcome::kClientGone;
  }

  // The tail goes out in one write, each event still its own chunk.
  std::string tail;
  for (int i = 0; i < events->tail_events(); ++i) {
    event.clear();
    events->tail(event, i);
    if (chunked) {
      char size[16];
      auto [end, ec] = std::to_chars(size, size + sizeof size, event.size(), 16);
      tail.append(size, end).append("\r\n").append(event).append("\r\n");
    } else {
      tail += event;
    }
  }
  if (chunked) tail += "0\r\n\r\n";
  stream.expires_after(kWriteTimeout);
  auto [ec, n] = co_await net::async_write(stream, net::buffer(tail), use_tuple);
  co_return ec ? Outcome::kClientGone : Outcome::kCompleted;
}

// A non-streamed answer: silence for TTFT plus the generation time, then the
// whole body in the protocol's shape.
net::awaitable<Outcome> SimServer::Impl::answer_once(beast::tcp_stream& stream,
                                                     const Exchange& ex) {
  co_await net::this_coro::throw_if_cancelled(false);
  const Profile& p = ex.profile;
  const bool blocked = ex.protocol == Protocol::kGemini && p.safety_block;
  const int tokens = blocked ? 0 : ex.plan.completion_tokens;
  // A blocked prompt has no answer for faults to hit.
  auto within = [&](int at) { return !blocked && at >= 0 && at <= tokens; };

  double wait_ms = std::max(ex.plan.ttft_ms, static_cast<double>(p.stall_before_first_token_ms)) +
                   1000.0 * tokens / ex.plan.tokens_per_second;
  if (within(p.stall_after_tokens)) wait_ms += p.stall_ms;
  net::steady_timer timer(co_await net::this_coro::executor, ex.received + to_duration(wait_ms));
  if (auto [ec] = co_await timer.async_wait(use_tuple); ec) co_return Outcome::kClientGone;

  if (within(p.error_after_tokens)) {
    // Generation failed: what the vendor answers a failed request with.
    Response res = make_protocol_error(ex.version, ex.keep_alive, ex.protocol,
                                       midstream_error(ex.protocol), ex.request_id);
    if (!ex.region.empty()) res.set("x-sim-region", ex.region);
    stream.expires_after(kWriteTimeout);
    auto [ec, n] = co_await http::async_write(stream, res, use_tuple);
    co_return ec ? Outcome::kClientGone : Outcome::kErrored;
  }

  std::string body = within(p.malformed_after_tokens) ? std::string("{not json") : answer_body(ex);
  http::response<http::empty_body> res{http::status::ok, ex.version};
  set_answer_headers(res, ex, /*streamed=*/false);
  res.keep_alive(ex.keep_alive);
  res.content_length(body.size());
  http::response_serializer<http::empty_body> serializer{res};
  stream.expires_after(kWriteTimeout);
  if (auto [ec, n] = co_await http::async_write_header(stream, serializer, use_tuple);
      ec || co_await cancelled()) {
    co_return Outcome::kClientGone;
  }
  // The cut fault: half the promised body, then the caller closes.
  const bool cut = within(p.cut_after_tokens);
  const std::size_t len = cut ? body.size() / 2 : body.size();
  stream.expires_after(kWriteTimeout);
  auto [ec, n] = co_await net::async_write(stream, net::buffer(body.data(), len), use_tuple);
  if (ec) co_return Outcome::kClientGone;
  co_return cut ? Outcome::kCut : Outcome::kCompleted;
}

Response SimServer::Impl::handle_models(const Request& req) {
  if (req.method() != http::verb::get) return make_error(req, method_not_allowed(req));
  if (auto e = check_auth(req)) return make_error(req, *e);
  json data = json::array();
  {
    std::lock_guard lk(profiles_mu);
    for (const auto& [model, profile] : profiles) {
      data.push_back(
          {{"id", model}, {"object", "model"}, {"created", 0}, {"owned_by", "llmgate-sim"}});
    }
  }
  return make_response(req, http::status::ok, dump({{"object", "list"}, {"data", data}}));
}

Response SimServer::Impl::handle_admin(const Request& req, std::string_view path) {
  const auto verb = req.method();
  if (path == "/admin/stats") {
    if (verb != http::verb::get) return make_error(req, method_not_allowed(req));
    const SimStats s = snapshot();
    return make_response(req, http::status::ok,
                         dump({{"requests", s.requests},
                               {"streams_completed", s.streams_completed},
                               {"streams_aborted", s.streams_aborted},
                               {"streams_cut", s.streams_cut},
                               {"streams_errored", s.streams_errored},
                               {"in_flight", s.in_flight},
                               {"max_in_flight", s.max_in_flight},
                               {"errors_injected", s.errors_injected},
                               {"connections_accepted", s.connections_accepted},
                               {"signatures_refused", s.signatures_refused},
                               {"tokens_issued", s.tokens.issued},
                               {"tokens_refused", s.tokens.refused},
                               {"expired_tokens_seen", s.tokens.expired_seen},
                               {"missing_tokens_seen", s.tokens.missing_seen}}));
  }
  if (path == "/admin/last-request") {
    if (verb != http::verb::get) return make_error(req, method_not_allowed(req));
    std::lock_guard lk(last_mu);
    if (!last) {
      return make_error(req, ApiError{404, "No chat completion request received yet.",
                                      "invalid_request_error", std::nullopt, std::nullopt});
    }
    return make_response(
        req, http::status::ok,
        dump({{"target", last->target}, {"headers", last->headers}, {"body", last->body}}));
  }
  if (path == "/admin/profiles") {
    if (verb != http::verb::get) return make_error(req, method_not_allowed(req));
    std::lock_guard lk(profiles_mu);
    json all = json::object();
    for (const auto& [model, profile] : profiles) all[model] = profile_to_json(profile);
    all["default"] = profile_to_json(default_profile);
    return make_response(req, http::status::ok, dump(all));
  }
  constexpr std::string_view kProfilePrefix = "/admin/profiles/";
  if (!path.starts_with(kProfilePrefix)) return make_error(req, not_found(req));

  const auto model = percent_decode(path.substr(kProfilePrefix.size()));
  if (!model || model->empty()) {
    return make_error(req, ApiError{400, "Bad model name in path.", "invalid_request_error",
                                    std::nullopt, std::nullopt});
  }
  const bool is_default = *model == "default";
  std::lock_guard lk(profiles_mu);
  auto it = profiles.find(*model);
  const Profile& current = is_default || it == profiles.end() ? default_profile : it->second;
  switch (verb) {
    case http::verb::get:
      return make_response(req, http::status::ok, dump(profile_to_json(current)));
    case http::verb::put: {
      const json patch = json::parse(req.body(), nullptr, /*allow_exceptions=*/false);
      Profile updated;
      try {
        if (patch.is_discarded()) throw std::invalid_argument("body: not valid JSON");
        updated = profile_from_json(patch, current);
      } catch (const std::invalid_argument& e) {
        return make_error(
            req, ApiError{400, e.what(), "invalid_request_error", std::nullopt, std::nullopt});
      }
      if (is_default) {
        default_profile = updated;
      } else {
        profiles[*model] = updated;
      }
      return make_response(req, http::status::ok, dump(profile_to_json(updated)));
    }
    case http::verb::delete_:
      if (is_default || it == profiles.end()) return make_error(req, not_found(req));
      profiles.erase(it);
      return make_response(req, http::status::ok, R"({"deleted":true})");
    default:
      return make_error(req, method_not_allowed(req));
  }
}

void SimServer::Impl::launch() {
  if (started) throw std::logic_error("SimServer: start() or run() called twice");
  started = true;
  for (unsigned i = 0; i < options.threads; ++i) {
    shards.push_back(std::make_unique<Shard>(shard_seed(options.seed, i)));
  }
  auto& ioc = shards.front()->ioc;
  const tcp::endpoint endpoint{net::ip::make_address(options.address), options.port};
  tcp::acceptor acceptor(ioc);
  acceptor.open(endpoint.protocol());
  acceptor.set_option(net::socket_base::reuse_address(true));
  acceptor.bind(endpoint);
  acceptor.listen(net::socket_base::max_listen_connections);
  bound_port = acceptor.local_endpoint().port();
  net::co_spawn(ioc, accept_loop(std::move(acceptor)), log_exception);
}

SimServer::SimServer(SimOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

SimServer::~SimServer() { stop(); }

std::uint16_t SimServer::start() {
  std::lock_guard lk(impl_->lifecycle_mu);
  impl_->launch();
  for (auto& shard : impl_->shards) {
    impl_->threads.emplace_back([&ioc = shard->ioc] { ioc.run(); });
  }
  return impl_->bound_port;
}

void SimServer::run() {
  Shard* first = nullptr;
  {
    std::lock_guard lk(impl_->lifecycle_mu);
    impl_->launch();
    for (std::size_t i = 1; i < impl_->shards.size(); ++i) {
      impl_->threads.emplace_back([&ioc = impl_->shards[i]->ioc] { ioc.run(); });
    }
    impl_->caller_running = true;
    first = impl_->shards.front().get();
  }
  first->ioc.run();
  {
    std::lock_guard lk(impl_->lifecycle_mu);
    impl_->caller_running = false;
  }
  impl_->caller_done.notify_all();
}

void SimServer::stop() {
  std::unique_lock lk(impl_->lifecycle_mu);
  if (!impl_->started || impl_->stopped) return;
  impl_->stopped = true;
  for (auto& shard : impl_->shards) shard->ioc.stop();
  for (auto& t : impl_->threads) {
    if (t.joinable()) t.join();
  }
  impl_->threads.clear();
  impl_->caller_done.wait(lk, [&] { return !impl_->caller_running; });
  // No thread runs the io_contexts any more: destroying them closes the
  // acceptor and every connection, so peers see the server go away.
  impl_->shards.clear();
}

std::uint16_t SimServer::port() const { return impl_->bound_port; }

void SimServer::set_profile(const std::string& model, const Profile& profile) {
  std::lock_guard lk(impl_->profiles_mu);
  impl_->profiles[model] = profile;
}

std::optional<Profile> SimServer::profile(const std::string& model) const {
  std::lock_guard lk(impl_->profiles_mu);
  auto it = impl_->profiles.find(model);
  if (it == impl_->profiles.end()) return std::nullopt;
  return it->second;
}

Profile SimServer::default_profile() const {
  std::lock_guard lk(impl_->profiles_mu);
  return impl_->default_profile;
}

void SimServer::set_default_profile(const Profile& profile) {
  std::lock_guard lk(impl_->profiles_mu);
  impl_->default_profile = profile;
}

SimStats SimServer::stats() const { return impl_->snapshot(); }

std::optional<RecordedRequest> SimServer::last_request() const {
  std::lock_guard lk(impl_->last_mu);
  return impl_->last;
}

}  // namespace llmgate::sim
