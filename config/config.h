// Typed, validated llmgate configuration.
//
// A Config is an immutable snapshot: it is built once by load_config() (or
// parse_config()) and then only read, so worker threads may share it through a
// std::shared_ptr<const Config> without locking. A hot reload swaps the
// pointer; in-flight requests keep the snapshot they started with.
//
// Nothing here knows about sockets or Beast.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/fingerprint.h"

namespace llmgate::config {

using Duration = std::chrono::milliseconds;

// Default timeouts, named next to the structs that use them.
inline constexpr Duration kDefaultConnectTimeout{2'000};
inline constexpr Duration kDefaultTtftTimeout{10'000};
inline constexpr Duration kDefaultIdleTimeout{30'000};
inline constexpr Duration kDefaultTotalTimeout{600'000};

struct Timeouts {
  Duration connect = kDefaultConnectTimeout;  // TCP connect + TLS handshake
  Duration ttft = kDefaultTtftTimeout;        // request written -> first content token
  Duration idle = kDefaultIdleTimeout;        // between two upstream reads after first token
  Duration total = kDefaultTotalTimeout;      // whole request, all attempts
};

// The same four keys, each optional: a provider overrides only what it names.
struct TimeoutOverrides {
  std::optional<Duration> connect;
  std::optional<Duration> ttft;
  std::optional<Duration> idle;
  std::optional<Duration> total;

  Timeouts apply_to(const Timeouts& base) const {
    return Timeouts{connect.value_or(base.connect), ttft.value_or(base.ttft),
                    idle.value_or(base.idle), total.value_or(base.total)};
  }
  bool operator==(const TimeoutOverrides&) const = default;
};

struct Listener {
  std::string address = "127.0.0.1";
  std::uint16_t port = 8080;  // 0 = pick a free port (tests)
  bool operator==(const Listener&) const = default;
};

struct ServerLimits {
  std::size_t max_body_bytes = 4 * 1024 * 1024;
  // POST /v1/embeddings: a batch of inputs (OpenAI takes 2,048 per request).
  std::size_t max_embeddings_body_bytes = 16 * 1024 * 1024;
  std::size_t max_header_bytes = 16 * 1024;
  std::size_t max_event_bytes = 1024 * 1024;  // one upstream SSE event
  // Client connections open at once on the API listeners (all workers); one
  // more is answered 503 + Retry-After and closed. The admin listener is not
  // counted, so probes and scrapes still get through.
  std::size_t max_connections = 10'000;
  Duration client_header_timeout{30'000};  // slowloris guard: whole request head
  Duration client_idle_timeout{60'000};    // keep-alive idle between requests
};

// Graceful shutdown (SIGTERM): readiness fails at once; the listeners keep
// accepting for `delay` (so load balancers and Kubernetes endpoints stop
// sending new work), then close; requests in flight get `timeout` to finish.
struct Drain {
  Duration delay{0};
  Duration timeout{30'000};
};

// Who sees how a request was routed: the x-llmgate-route, -deployment and
// -failed headers and the per-deployment reasons in routing errors (prices,
// excluded providers, upstream model names). The log always has them.
enum class Explain {
  kAll,   // every client (the default without gateway keys: a sidecar's own app)
  kKeys,  // only clients whose key has `explain: true` (the default with keys)
};

struct Server {
  std::vector<Listener> listeners{Listener{}};
  // Serves only /metrics, /healthz, /readyz and /admin/*: in sidecar mode the
  // API binds 127.0.0.1 while probes and scrapes reach the pod IP here.
  std::optional<Listener> admin_listener;
  unsigned workers = 0;  // 0 = one per hardware thread
  ServerLimits limits;
  Drain drain;
  std::optional<Explain> explain;  // unset: kAll without gateway keys, kKeys with them
};

// A parsed base_url: scheme://host[:port][/path-prefix]
struct UpstreamUrl {
  bool tls = false;
  std::string host;
  std::uint16_t port = 0;
  std::string path_prefix;  // "" or "/openai/v1" — never ends in '/'
  bool operator==(const UpstreamUrl&) const = default;
  std::string to_string() const;
  // "host[:port]" for the Host header: IPv6 hosts in brackets, default port omitted.
  // `host` itself never has brackets (it is what the resolver and SNI want).
  std::string authority() const;
};

struct Tls {
  bool verify = true;   // certificate chain + hostname
  std::string ca_file;  // "" = system default store
  std::string sni;      // "" = the host of base_url
  bool operator==(const Tls&) const = default;
};

struct Pool {
  // Per provider, per worker thread. An LLM stream holds its connection for
  // seconds to minutes, so this bounds the concurrent streams one worker
  // sends to a provider; when it is full, a request waits up to the connect
  // timeout, then tries the next candidate (local saturation, not an
  // upstream failure).
  std::size_t max_connections = 2048;
  Duration idle_timeout{60'000};  // idle keep-alive connections closed after this
  bool operator==(const Pool&) const = default;
};

enum class Protocol { kOpenAi, kAnthropic, kGemini, kBedrock };
const char* to_string(Protocol p);  // "openai", "anthropic", "gemini", "bedrock"

// How a deployment is asked to continue an assistant message: the request
// ends with the text already sent as an assistant message, and
enum class Continuation {
  kNone,
  kPrefix,                // OpenAI-compatible: that message has "prefix": true (DeepSeek, Mistral)
  kContinueFinalMessage,  // OpenAI-compatible: "continue_final_message": true and
                          // "add_generation_prompt": false (vLLM, SGLang)
  kPrefill,               // Anthropic: assistant prefill; Gemini: a trailing model turn
};
const char* to_string(Continuation c);  // "none", "prefix", "continue_final_message", "prefill"

inline constexpr const char* kDefaultAnthropicVersion = "2023-06-01";
inline constexpr std::int64_t kDefaultMaxTokens = 4096;
// reasoning_effort -> thinking budget (tokens) for protocols that take a budget.
inline std::map<std::string, std::int64_t> kDefaultThinkingBudgets() {
  return {{"minimal", 1024}, {"low", 2048}, {"medium", 8192}, {"high", 24576}, {"xhigh", 32768}};
}

// Short-lived credentials a provider's requests carry, fetched from a token
// endpoint and refreshed ahead of expiry by the gateway (providers[].auth;
// docs/providers.md: Vertex AI, Azure OpenAI with Entra ID). Values the
// environment supplies (GOOGLE_APPLICATION_CREDENTIALS, GCE_METADATA_HOST,
// AZURE_TENANT_ID, AZURE_CLIENT_ID, AZURE_FEDERATED_TOKEN_FILE,
// AZURE_AUTHORITY_HOST) are resolved when the config is read.
struct ProviderAuth {
  enum class Kind {
    kNone,
    // A Google service account's key file: a signed JWT exchanged for an
    // access token (google_service_account_file, or `google: default`
    // with GOOGLE_APPLICATION_CREDENTIALS).
    kGoogleServiceAccount,
    // The GCE/GKE metadata server's token for the instance's (or the
    // workload's) service account (`google: metadata`, or `google:
    // default` without GOOGLE_APPLICATION_CREDENTIALS).
    kGoogleMetadata,
    // Microsoft Entra ID: client credentials with a secret, or workload
    // identity (a federated token file as the client assertion).
    kEntra,
  };
  Kind kind = Kind::kNone;
  std::string file;  // the service account key file, or the federated token file
  std::string tenant_id;
  std::string client_id;
  std::string client_secret;         // resolved secret (Entra client credentials)
  std::string client_secret_source;  // "env:NAME" / "file:/path": for logs, never the secret
  // The token endpoint ("" = the flow's own: the key file's token_uri,
  // the authority's /{tenant}/oauth2/v2.0/token, the metadata server's).
  std::string token_url;
  std::string authority;  // Entra: https://login.microsoftonline.com
  std::string scope;      // "" = the flow's (cloud-platform; cognitiveservices .default)
  std::string source;     // how it was configured, for logs ("google_service_account_file")
  bool enabled() const { return kind != Kind::kNone; }
  bool operator==(const ProviderAuth&) const = default;
};
const char* to_string(ProviderAuth::Kind k);

struct Provider {
  std::string name;
  UpstreamUrl base_url;
  std::string api_key;         // resolved secret ("" = no Authorization header)
  std::string api_key_source;  // "env:NAME" / "file:/path" / "" — for logs, never the key
  std::string region;
  Pool pool;
  TimeoutOverrides timeouts;
  Tls tls;
  std::map<std::string, std::string> headers;  // extra headers sent upstream
  // Values of `headers` read from env/file: secrets, scrubbed like api_key.
  std::vector<std::string> header_secrets;
  // The key's header: "" = "Authorization: Bearer <key>"; another name (Azure
  // OpenAI's "api-key") carries the key alone.
  std::string api_key_header;
  // The chat request target below base_url's path ("" = the protocol's,
  // "/chat/completions"); "{model}" becomes the deployment's upstream model
  // (Azure OpenAI: "/deployments/{model}/chat/completions").
  std::string chat_path;
  // Query parameters on every upstream request, encoded once: "api-version=2024-10-21".
  std::string query;
  // Send stream_options.include_usage upstream (some OpenAI-compatible
  // servers refuse it with a 400; the gateway also learns that on its own).
  bool stream_options = true;
  // Ask the upstream for a stream. false: every attempt is non-streamed (no
  // TTFT measured; a stream client gets the answer as events). A deployment
  // may override it; a 400 naming `stream` teaches it on its own.
  bool stream = true;
  // The provider's own API (docs/providers.md): OpenAI chat completions (and
  // every OpenAI-compatible server), Anthropic Messages, or Google Gemini
  // (generateContent). Clients always speak OpenAI to the gateway.
  Protocol protocol = Protocol::kOpenAi;
  // Anthropic: the anthropic-version header.
  std::string anthropic_version = kDefaultAnthropicVersion;
  // Bedrock: the AWS region its requests are signed for (from base_url's
  // host, bedrock-runtime.REGION.amazonaws.com, when not set), and the
  // profile of the shared credentials file ("" = AWS_PROFILE, else
  // "default"). Without api_key (an Amazon Bedrock API key, sent as a
  // bearer token) requests are signed with AWS Signature Version 4 from the
  // AWS SDKs' credential chain.
  std::string aws_region;
  std::string aws_profile;
  // Short-lived credentials fetched by the gateway (instead of api_key).
  ProviderAuth auth;
  // Anthropic requires max_tokens: sent when a request names no limit.
  std::int64_t default_max_tokens = kDefaultMaxTokens;
  // A request's reasoning_effort as a thinking budget in tokens (Anthropic
  // thinking.budget_tokens, Gemini thinkingConfig.thinkingBudget); an effort
  // not listed here is refused by these protocols. OpenAI gets the effort as is.
  std::map<std::string, std::int64_t> thinking_budgets = kDefaultThinkingBudgets();
  // Same endpoint, credentials and settings: a hot reload keeps its pooled
  // connections (and TLS context) only then.
  bool operator==(const Provider&) const = default;
};

struct Price {
  double input_per_1m = 0;   // USD per 1M input tokens
  double output_per_1m = 0;  // USD per 1M output tokens
  // USD per 1M input tokens read from the provider's prompt cache
  // (usage.prompt_tokens_details.cached_tokens); unset: input_per_1m.
  std::optional<double> cached_input_per_1m;
  // USD for an answer's usage; `cached` of the `input` tokens at the cached
  // price. Negative counts read as 0.
  double cost_usd(std::int64_t input, std::int64_t cached, std::int64_t output) const {
    input = std::max<std::int64_t>(0, input);
    cached = std::clamp<std::int64_t>(cached, 0, input);
    const double full = static_cast<double>(input - cached) * input_per_1m;
    const double from_cache =
        static_cast<double>(cached) * cached_input_per_1m.value_or(input_per_1m);
    return (full + from_cache +
            static_cast<double>(std::max<std::int64_t>(0, output)) * output_per_1m) /
           1e6;
  }
};

// The client API operations a deployment may serve (deployments[].operations).
enum class Operation { kChat, kResponses, kEmbeddings, kCompletions };
inline constexpr Operation kAllOperations[] = {Operation::kChat, Operation::kResponses,
                                               Operation::kEmbeddings, Operation::kCompletions};
// "chat", "responses", "embeddings", "completions" (the config's names).
const char* to_string(Operation o);
// The OpenTelemetry GenAI name (gen_ai.operation.name): "chat", "responses",
// "embeddings", "text_completion". Metric label and log field.
const char* gen_ai_name(Operation o);
// The endpoint that serves it ("/v1/chat/completions", ...).
const char* endpoint_of(Operation o);
inline constexpr unsigned operation_bit(Operation o) { return 1u << static_cast<unsigned>(o); }

struct Deployment {
  std::string provider;  // name of a Provider in Config::providers
  std::string model;     // the upstream model name sent to the provider
  Price price;
  // Cold-start priors for the router, used until live samples exist. Without
  // them the router uses routing.ttft_prior (+ a region-distance term) and
  // routing.tps_prior.
  std::optional<Duration> expected_ttft;
  std::optional<double> expected_tps;
  // Upstream requests to this deployment at once, across all workers (unset:
  // no limit). A request that finds it full waits in a FIFO queue of at most
  // `max_queue` (for at most the connect timeout), else moves on to the next
  // candidate; if every candidate is full the client gets 503 + Retry-After.
  // A deployment listed by several models shares one limit (the smallest).
  std::optional<unsigned> max_concurrent;
  unsigned max_queue = 0;
  // The model's context window in tokens (prompt and output together), as
  // the provider documents it (docs/providers.md lists common ones; never
  // guessed). A request whose estimated prompt plus max_tokens is larger
  // skips the deployment; unset: no check.
  std::optional<std::int64_t> context_window;
  // The prior of this deployment's prefill cost: ms of first-token time per
  // 1,000 input tokens not read from a prompt cache, until its own answers
  // at several prompt sizes say better (docs/routing.md, "TTFT and the
  // prompt"); unset: kDefaultPrefillMsPer1k.
  std::optional<double> prefill_ms_per_1k_tokens;
  // Wire: a stream from the upstream or not (unset: the provider's `stream`).
  std::optional<bool> stream;
  // The first-token deadline of this deployment (a reasoning model thinks
  // before its first visible token): a longer one, or none at all
  // (`ttft_timeout: none`: the response head must still come within the
  // provider's ttft timeout; then only the request's total deadline and the
  // idle timeout apply). Unset: the provider's timeouts and the live deadline.
  std::optional<Duration> ttft_timeout;
  bool first_token_deadline = true;
  // How it continues a stream another deployment broke off after its first
  // token (docs/failure-semantics.md, "Continuation"): declared, never
  // guessed -- a provider that does not honour it would answer anew and the
  // client's text would repeat. kNone: it is never asked to.
  Continuation continuation = Continuation::kNone;
  // The operations it serves (a set of operation_bit): chat unless listed.
  // Other than chat, only through the OpenAI protocol.
  unsigned operations = operation_bit(Operation::kChat);
  bool serves(Operation o) const { return (operations & operation_bit(o)) != 0; }
  // "provider/model": its name in statistics, health, limits, metrics and
  // logs, used several times a request. Built by the config reader (a
  // Deployment built by hand calls set_id() once it has both).
  const std::string& id() const { return id_; }
  // config::hash64 of id(): how prompt-cache affinity names it (routing/prompt_affinity.h).
  std::uint64_t id_hash() const { return id_hash_; }
  void set_id() {
    id_ = provider + "/" + model;
    id_hash_ = hash64(id_);
  }

 private:
  std::string id_;
  std::uint64_t id_hash_ = 0;
};

// ---- Routing (docs/routing.md) ---------------------------------------------

enum class Policy {
  kLatency,     // lowest expected TTFT, load-aware (see Routing::load_factor)
  kThroughput,  // highest output speed (chars/s across models, tokens/s within one)
  kE2e,         // lowest TTFT + expected output tokens / TPS
  kCost,        // cheapest that meets the constraints, then latency
  kBalanced,    // weighted score of normalised TTFT, speed and price
  kOrdered,     // configured order (priority failover)
  kRoundRobin,  // baseline for benchmarks
  kRandom,      // baseline for benchmarks
};
// Every policy, in declaration order (name lists, metrics label values).
inline constexpr std::array<Policy, 8> kAllPolicies = {
    Policy::kLatency,  Policy::kThroughput, Policy::kE2e,        Policy::kCost,
    Policy::kBalanced, Policy::kOrdered,    Policy::kRoundRobin, Policy::kRandom};
const char* to_string(Policy p);
std::optional<Policy> parse_policy(std::string_view name);  // "latency", "round_robin", ...

// Which TTFT percentile a max-TTFT constraint applies to.
enum class Percentile { kP50 = 50, kP90 = 90, kP95 = 95, kP99 = 99 };

struct Constraints {
  std::optional<double> max_output_price_per_1m;  // USD per 1M output tokens
  std::optional<double> min_tps;                  // tokens/s (live estimate, else prior)
  std::optional<Duration> max_ttft;               // at `max_ttft_percentile` (else the estimate)
  Percentile max_ttft_percentile = Percentile::kP95;
  // A request's TTFT limit at another percentile than the configured one,
  // when neither is stricter than the other: both must hold. Never in a file.
  std::optional<Duration> extra_max_ttft;
  Percentile extra_max_ttft_percentile = Percentile::kP95;
  std::vector<std::string> allow_providers;  // empty = all
  std::vector<std::string> deny_providers;
  std::vector<std::string> regions;  // empty = all; a hard filter, never relaxed
};

// `balanced` score = ttft * normalised TTFT + tps * normalised slowness +
// price * normalised price, each normalised to [0, 1] over the candidates.
struct BalancedWeights {
  double ttft = 0.5;
  double tps = 0.25;
  double price = 0.25;
};

struct Hedging {
  bool enabled = false;
  std::optional<Duration>
      delay;  // fixed delay; unset = the candidate's live TTFT at delay_percentile
  Percentile delay_percentile = Percentile::kP99;
  Duration min_delay{50};        // floor for the live delay
  double max_extra_ratio = 0.1;  // at most this share of extra upstream requests
  // With hedging off: an attempt past its hedge delay is hedged anyway when
  // another attempt at the same deployment has waited as long (a stall or a
  // slowdown in progress, not one slow request). Spends the retry budget.
  bool on_stall = true;
};

// What a public model's requests are routed by. routing.defaults gives the
// values for every model; models[i].routing overrides them key by key.
// The speed guard before commit (docs/failure-semantics.md, "Speed guard"):
// a stream's first events are held until `tokens` output events have come;
// if they have not come within `within` of the first one, the attempt is
// given up for the next candidate, invisibly. Catches a deployment whose
// first token is fast but whose stream then crawls (a known failure of
// providers under load). Costs every stream the time to its `tokens`-th
// event before the client sees its first.
struct CommitAfter {
  unsigned tokens = 0;  // 0: off (the first output event commits)
  Duration within{1'000};
  bool operator==(const CommitAfter&) const = default;
};

struct RoutingPolicy {
  Policy policy = Policy::kLatency;
  Constraints constraints;
  BalancedWeights weights;
  Hedging hedging;
  std::int64_t typical_output_tokens = 256;  // e2e, when the request sets no max_tokens
  bool allow_fallbacks = true;
  unsigned max_attempts = 3;  // including the first
  CommitAfter commit_after;
};

struct Ejection {
  unsigned consecutive_failures = 5;  // eject after this many failures in a row
  double error_rate = 0.5;            // ... or a decayed error rate at least this
  unsigned min_requests = 10;         // ... over at least this many attempts
  Duration base_duration{5'000};      // first ejection; doubles each time
  Duration max_duration{300'000};
  double jitter = 0.2;                // +-20% on each ejection time
  double max_ejected_fraction = 0.5;  // of a model's deployments
  // While ejected, one request may probe the deployment this often (it goes
  // first and is hedged by the next candidate, so it costs that request
  // little); a success ends the ejection. 0: probe only once the ejection
  // time has passed (half-open).
  Duration probe_interval{500};
};

// gRPC/Finagle-style retry budget: every request deposits `ratio` tokens,
// every retry spends one; `min_per_second` retries are always allowed.
struct RetryBudget {
  double ratio = 0.2;
  double min_per_second = 10;
};

// The router's and the estimators' defaults, defined once: config::Routing
// starts from them and so do routing::RouterOptions and routing::StatsOptions.
inline constexpr double kDefaultExploration = 0.01;
// Extra upstream requests that learning (re-checks, explorations, size races)
// may add, as a share of a model's requests (docs/routing.md, "What learning
// costs").
inline constexpr double kDefaultLearningBudget = 0.05;
inline constexpr double kDefaultLoadFactor = 0.05;
inline constexpr double kDefaultDeadlineFactor = 3.0;
inline constexpr Duration kDefaultMinTtftDeadline{250};
inline constexpr Duration kDefaultTtftPrior{1'000};
// The prefill prior: ms of first-token time per 1,000 uncached input tokens
// (a 50k-token prompt: +2.5 s), until a deployment's answers say better.
inline constexpr double kDefaultPrefillMsPer1k = 50;
inline constexpr double kDefaultTpsPrior = 50;
inline constexpr Duration kDefaultTtftTau{10'000};
inline constexpr Duration kDefaultRelaxTau{60'000};
inline constexpr Duration kDefaultWindow{60'000};
inline constexpr Duration kDefaultErrorTau{30'000};
inline constexpr std::int64_t kDefaultMinTokensForTps = 10;

// Prompt-cache affinity (docs/routing.md, "Prompt-cache affinity"): how
// long a prefix a deployment served is taken to stay in its provider's
// cache (OpenAI and Anthropic keep one 5 minutes by default; 0: affinity
// off), and how many prefixes the table holds (~100 bytes each).
struct Affinity {
  Duration ttl{300'000};
  std::size_t max_entries = 100'000;
  bool operator==(const Affinity&) const = default;
};
inline constexpr std::size_t kMaxAffinityEntries = 10'000'000;

struct Routing {
  std::string region;  // the gateway's own region; "" = $LLMGATE_REGION, else unknown
  double exploration = kDefaultExploration;
  double learning_budget = kDefaultLearningBudget;
  // latency: expected TTFT = estimate x (1 + load_factor x attempts awaiting their first token)
  double load_factor = kDefaultLoadFactor;
  double deadline_factor = kDefaultDeadlineFactor;       // TTFT deadline = live p95 x factor ...
  Duration min_ttft_deadline = kDefaultMinTtftDeadline;  // ... at least this, at most timeouts.ttft
  Duration ttft_prior = kDefaultTtftPrior;
  double tps_prior = kDefaultTpsPrior;
  Duration ttft_tau = kDefaultTtftTau;
  Duration relax_tau = kDefaultRelaxTau;
  Duration window = kDefaultWindow;
  Duration error_tau = kDefaultErrorTau;
  std::int64_t min_tokens_for_tps = kDefaultMinTokensForTps;
  Ejection ejection;
  RetryBudget retry_budget;
  Affinity affinity;
  RoutingPolicy defaults;
};

struct Model {
  std::string name;                     // public name clients send
  std::vector<Deployment> deployments;  // ordered: first is preferred
  RoutingPolicy routing;                // routing.defaults with this model's overrides applied
};

// ---- Gateway keys (docs/config.md, "auth") -----------------------------------

// A key clients present as `Authorization: Bearer <key>`. Only its SHA-256 is
// configured (`llmgate --hash-key` prints it), so the config holds no secret.
struct GatewayKey {
  std::string name;                 // for logs and metrics; never the key
  std::string sha256;               // lowercase hex, 64 characters
  std::vector<std::string> models;  // public models it may use; empty = all
  std::optional<double> requests_per_minute;
  std::optional<double> tokens_per_minute;  // input + output, counted after each response
  // Spend budgets in USD (the deployments' prices x the usage providers
  // report), per calendar day and month in UTC. Charged after each answer
  // (never cut for it); a key at or over a budget is refused until the
  // period ends (429 insufficient_quota).
  std::optional<double> budget_usd_per_day{};
  std::optional<double> budget_usd_per_month{};
  bool has_usage_limits() const {
    return tokens_per_minute || budget_usd_per_day || budget_usd_per_month;
  }
  // Per-request overrides (`route`, x-llmgate-*) from this key may loosen the
  // configured limits (price cap, max_attempts, hedging, ...); by default a
  // request can only narrow them (docs/routing.md, "Per-request overrides").
  bool allow_overrides = false;
  bool explain = false;  // sees route explanations under server.explain: keys
  bool operator==(const GatewayKey&) const = default;
};

struct Auth {
  // Empty: the API is open (sidecar on 127.0.0.1). Otherwise every /v1/*
  // request needs one of these keys.
  std::vector<GatewayKey> keys;
  // If set, /admin/* needs `Authorization: Bearer <admin key>` on any listener.
  std::string admin_key_sha256;
  // Set only by an explicit `enabled: false` / `admin_open: true` in the file:
  // a reload may remove every key (or the admin key) only when the new file
  // says so (a half-written file must not open the gateway; docs/security.md).
  bool declared_open = false;
  bool admin_declared_open = false;
  bool enabled() const { return !keys.empty(); }
};

// shared_state: replicas share key request limits, deployments'
// max_concurrent and upstream Retry-After cooldowns through Redis (RESP2:
// Redis, Valkey, ...). Latency statistics stay local on purpose: each replica
// measures its own path (docs/scale-out.md).
struct SharedState {
  enum class OnFailure {
    kOpen,    // decide with this replica's own limits, warn and count it
    kClosed,  // refuse what needs the shared state: 503 (requests) / skip (slots)
  };
  std::string host;  // "" = not configured: every limit is this process's own
  std::uint16_t port = 6379;
  bool tls = false;  // rediss://
  Tls tls_settings;
  int db = 0;
  std::string username;         // ACL user; "" = the default user
  std::string password;         // resolved secret; "" = no AUTH
  std::string password_source;  // "env:NAME" / "file:/path", for logs
  std::string key_prefix = "llmgate";
  OnFailure on_failure = OnFailure::kOpen;
  Duration timeout{50};             // per Redis command: the most a request waits for it
  Duration connect_timeout{1'000};  // TCP + TLS + AUTH
  Duration lease_window{100};       // a key's rate earned in this long is leased at once
  Duration slot_ttl{15'000};        // a crashed replica's max_concurrent slots free after this
  // One replica's outlier ejection of a deployment is applied by the others
  // for the same time (off: each replica ejects on its own measurements).
  bool share_ejections = true;
  bool enabled() const { return !host.empty(); }
  bool operator==(const SharedState&) const = default;
};

// ---- Traces (docs/config.md, "tracing"; docs/tracing.md) ---------------------

// Which requests are traced: OTEL_TRACES_SAMPLER's samplers.
struct TraceSampler {
  enum class Root { kAlwaysOn, kAlwaysOff, kRatio };
  Root root = Root::kAlwaysOn;
  double ratio = 1.0;        // kRatio: the share of traces recorded, 0..1
  bool parent_based = true;  // a caller's traceparent decides when it has one
  bool operator==(const TraceSampler&) const = default;
};
// "always_on", "always_off", "traceidratio", or one of them after
// "parentbased_"; `arg`: the ratio ("" = 1). nullopt with `error` otherwise.
std::optional<TraceSampler> parse_trace_sampler(std::string_view name, std::string_view arg,
                                                std::string* error);
std::string to_string(const TraceSampler& s);  // "parentbased_traceidratio 0.25"

// OpenTelemetry traces exported over OTLP/HTTP with the JSON encoding. The
// standard OTEL_* environment variables give the defaults; the file's keys
// win over them.
struct Tracing {
  UpstreamUrl endpoint;  // the traces URL (path included: /v1/traces); no host = off
  Tls tls;
  std::string endpoint_source;  // where the endpoint came from, for logs
  std::string service_name = "llmgate";
  // Resource attributes besides service.name (OTEL_RESOURCE_ATTRIBUTES).
  std::vector<std::pair<std::string, std::string>> resource;
  TraceSampler sampler;
  // Sent with every export (a hosted backend's API key). Never logged.
  std::vector<std::pair<std::string, std::string>> headers;
  Duration timeout{2'000};         // one export, connect included
  Duration schedule_delay{1'000};  // how often the buffer is exported
  std::size_t max_queue_size = 2048;
  std::size_t max_export_batch_size = 512;
  bool enabled() const { return !endpoint.host.empty(); }
  bool operator==(const Tracing&) const = default;
};

struct Config {
  Server server;
  Auth auth;
  SharedState shared_state;
  Tracing tracing;
  Timeouts timeouts;
  Routing routing;
  std::vector<Provider> providers;
  std::vector<Model> models;
  // True when the file has a `models:` key (possibly an empty list): an
  // explicit "no models", which a reload accepts; a missing key it refuses.
  bool models_declared = false;
  // Problems that do not stop the gateway but an operator should see at
  // start-up (a secret file readable by others, say). Never contain a secret.
  std::vector<std::string> warnings;

  // server.explain with its default resolved.
  Explain explain() const {
    return server.explain.value_or(auth.enabled() ? Explain::kKeys : Explain::kAll);
  }

  const Provider* find_provider(const std::string& name) const;
  const Model* find_model(const std::string& name) const;
  // Provider timeouts merged over the defaults.
  Timeouts timeouts_for(const Provider& p) const { return p.timeouts.apply_to(timeouts); }
  // The same, with the deployment's own first-token deadline: its
  // ttft_timeout, or none at all (the request's total) for `ttft_timeout: none`.
  Timeouts timeouts_for(const Provider& p, const Deployment& d) const {
    Timeouts t = timeouts_for(p);
    if (!d.first_token_deadline) {
      t.ttft = t.total;
    } else if (d.ttft_timeout) {
      t.ttft = *d.ttft_timeout;
    }
    return t;
  }
};

// what() lists every problem in the file, one per line, each as
//   gateway.yaml:12:21: providers[2].timeouts: unknown key "ttf" (did you mean "ttft"?)
//   gateway.yaml:18:19: models[0].deployments[1].provider: unknown provider "grok"
// (see docs/config.md, "Errors"). It never contains an API key.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Environment lookup, injectable for tests.
using EnvLookup = std::optional<std::string> (*)(const std::string& name);
std::optional<std::string> process_env(const std::string& name);

// Parse YAML text. `origin` names the source in messages (a file path).
std::shared_ptr<const Config> parse_config(const std::string& yaml_text,
                                           const std::string& origin = "<config>",
                                           EnvLookup env = &process_env);
std::shared_ptr<const Config> load_config(const std::string& path, EnvLookup env = &process_env);

// "250ms", "2s", "1m", "1.5s", "1h" -> milliseconds. Throws std::invalid_argument.
Duration parse_duration(const std::string& text);
// "http://h:p/prefix" -> UpstreamUrl. Throws std::invalid_argument.
UpstreamUrl parse_upstream_url(const std::string& text);
// "4MiB", "16KiB", "1024" -> bytes. Throws std::invalid_argument.
std::size_t parse_size(const std::string& text);

}  // namespace llmgate::config
