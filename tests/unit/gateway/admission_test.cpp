// Admission without a socket: the request head and body, the keys and the
// config in; an admitted request or the client's error out, in the order a
// client should learn things (nothing about models before a valid key).
#include "gateway/access/admission.h"

#include <gtest/gtest.h>

#include <map>

namespace llmgate::gateway {
namespace {

std::shared_ptr<const config::Config> cfg() {
  static const auto c = config::parse_config(R"(
providers:
  - name: p
    base_url: http://127.0.0.1:9/v1
  - name: q
    base_url: http://127.0.0.1:10/v1
models:
  - name: chat
    deployments:
      - {provider: p, model: m}
      - {provider: q, model: m}
  - name: other
    deployments:
      - {provider: p, model: o}
auth:
  keys:
    - name: app
      sha256: )" + sha256_hex("sk-app") + R"(
      models: [chat]
      requests_per_minute: 1
)");
  return c;
}

const std::string kBody = R"({"model":"chat","messages":[{"role":"user","content":"hi"}]})";

RequestHead head(std::string_view authorization = "Bearer sk-app",
                 std::vector<std::string_view> via = {},
                 std::map<std::string, std::string> headers = {}) {
  return RequestHead{authorization,
                     "application/json",
                     std::move(via),
                     [headers](std::string_view name) -> std::optional<std::string> {
                       auto it = headers.find(std::string(name));
                       if (it == headers.end()) return std::nullopt;
                       return it->second;
                     },
                     {}};
}

Refusal refusal(std::variant<Admitted, Refusal> r) {
  EXPECT_TRUE(std::holds_alternative<Refusal>(r));
  if (!std::holds_alternative<Refusal>(r)) return Refusal{};
  return std::get<Refusal>(std::move(r));
}

TEST(Admission, AdmitsAValidRequestWithItsModelAndKey) {
  KeyStore keys(cfg()->auth);
  auto r = admit(chat_completions_api(), head(), kBody, *cfg(), keys, "llmgate-abc");
  ASSERT_TRUE(std::holds_alternative<Admitted>(r));
  const auto& a = std::get<Admitted>(r);
  EXPECT_EQ(a.model->name, "chat");
  ASSERT_NE(a.key, nullptr);
  EXPECT_EQ(a.key->name, "app");
  EXPECT_EQ(a.req.model, "chat");
}

TEST(Admission, AMissingOrWrongKeyIsA401BeforeAnythingElse) {
  KeyStore keys(cfg()->auth);
  // Even a body that is not JSON: the key comes first.
  const Refusal r = refusal(admit(chat_completions_api(), head(""), "not json", *cfg(), keys, "v"));
  EXPECT_EQ(r.error.status, 401);
  EXPECT_EQ(r.auth, AuthRejection::kUnauthenticated);
  const Refusal w =
      refusal(admit(chat_completions_api(), head("Bearer sk-wrong"), kBody, *cfg(), keys, "v"));
  EXPECT_EQ(w.error.status, 401);
  EXPECT_EQ(w.error.message.find("sk-wrong"), std::string::npos);
}

TEST(Admission, OurOwnViaNameIsARequestLoop) {
  KeyStore keys(cfg()->auth);
  const Refusal r =
      refusal(admit(chat_completions_api(), head("Bearer sk-app", {"1.1 proxy", "1.1 llmgate-abc"}),
                    kBody, *cfg(), keys, "llmgate-abc"));
  EXPECT_EQ(r.error.status, 508);
  EXPECT_EQ(r.error.code, "loop_detected");
  EXPECT_NE(r.log.find("llmgate-abc"), std::string::npos);
  // Another gateway's name is not a loop.
  auto ok = admit(chat_completions_api(), head("Bearer sk-app", {"1.1 llmgate-def"}), kBody, *cfg(),
                  keys, "llmgate-abc");
  EXPECT_TRUE(std::holds_alternative<Admitted>(ok));
}

TEST(Admission, ABadBodyIsA400AndAnUnknownModelA404) {
  KeyStore keys(config::Auth{});
  EXPECT_EQ(refusal(admit(chat_completions_api(), head(""), "{", *cfg(), keys, "v")).error.status,
            400);
  const Refusal r = refusal(admit(chat_completions_api(), head(""),
                                  R"({"model":"nope","messages":[{"role":"user","content":"hi"}]})",
                                  *cfg(), keys, "v"));
  EXPECT_EQ(r.error.status, 404);
  EXPECT_EQ(r.error.code, "model_not_found");
  EXPECT_FALSE(r.auth);
}

TEST(Admission, AKeyMayUseOnlyItsModelsAndItsRate) {
  KeyStore keys(cfg()->auth);
  const Refusal r = refusal(
      admit(chat_completions_api(), head(),
            R"({"model":"other","messages":[{"role":"user","content":"hi"}]})", *cfg(), keys, "v"));
  EXPECT_EQ(r.error.status, 403);
  EXPECT_EQ(r.auth, AuthRejection::kModelNotAllowed);
  ASSERT_TRUE(std::holds_alternative<Admitted>(
      admit(chat_completions_api(), head(), kBody, *cfg(), keys, "v")));
  const Refusal limited = refusal(admit(chat_completions_api(), head(), kBody, *cfg(), keys, "v"));
  EXPECT_EQ(limited.error.status, 429);  // requests_per_minute: 1
  EXPECT_EQ(limited.auth, AuthRejection::kRateLimited);
}

// On every endpoint, and before whether the model serves it: a key learns
// nothing about a model it may not use (docs/security.md).
TEST(Admission, AModelTheKeyMayNotUseIsA403OnEveryEndpoint) {
  KeyStore keys(cfg()->auth);
  const std::pair<const ClientApi*, std::string> asks[] = {
      {&chat_completions_api(), R"({"model":"other","messages":[{"role":"user","content":"hi"}]})"},
      {&responses_api(), R"({"model":"other","input":"hi"})"},
      {&embeddings_api(), R"({"model":"other","input":"hi"})"},
      {&completions_api(), R"({"model":"other","prompt":"hi"})"},
  };
  for (const auto& [api, body] : asks) {
    const Refusal r = refusal(admit(*api, head(), body, *cfg(), keys, "v"));
    EXPECT_EQ(r.error.status, 403) << api->name() << ": " << r.error.message;
    EXPECT_EQ(r.error.code, "model_not_allowed") << api->name();
    EXPECT_EQ(r.auth, AuthRejection::kModelNotAllowed) << api->name();
  }
  // The key's own model still says what it does not serve.
  const Refusal unserved = refusal(
      admit(embeddings_api(), head(), R"({"model":"chat","input":"hi"})", *cfg(), keys, "v"));
  EXPECT_EQ(unserved.error.status, 400);
  EXPECT_EQ(unserved.error.code, "unsupported_operation");
}

TEST(Admission, ABadRoutingOverrideIsA400NamingTheRoute) {
  KeyStore keys(config::Auth{});
  const Refusal r =
      refusal(admit(chat_completions_api(), head("", {}, {{"x-llmgate-policy", "fastest-please"}}),
                    kBody, *cfg(), keys, "v"));
  EXPECT_EQ(r.error.status, 400);
  EXPECT_EQ(r.error.param, "route");
  EXPECT_EQ(r.error.code, "invalid_route");
  auto ok = admit(chat_completions_api(), head("", {}, {{"x-llmgate-policy", "cost"}}), kBody,
                  *cfg(), keys, "v");
  ASSERT_TRUE(std::holds_alternative<Admitted>(ok));
  EXPECT_EQ(std::get<Admitted>(ok).route.policy, config::Policy::kCost);
}

// Each refusal's reason (llmgate_requests_total's outcome, the log line's
// reason) and the model it names once that is known.
TEST(Admission, EveryRefusalSaysWhyAndNamesItsModelOnceKnown) {
  KeyStore keys(cfg()->auth);
  auto ask = [&](std::string_view authorization, std::string body,
                 std::vector<std::string_view> via = {}) {
    return refusal(admit(chat_completions_api(), head(authorization, std::move(via)), body, *cfg(),
                         keys, "llmgate-abc"));
  };
  const Refusal unauthenticated = ask("", kBody);
  EXPECT_EQ(refused_as(unauthenticated), Refused::kUnauthenticated);
  EXPECT_EQ(unauthenticated.model, nullptr);
  EXPECT_EQ(refused_as(ask("Bearer sk-app", kBody, {"1.1 llmgate-abc"})), Refused::kLoopDetected);
  const Refusal bad_body = ask("Bearer sk-app", "{");
  EXPECT_EQ(refused_as(bad_body), Refused::kInvalidRequest);
  EXPECT_EQ(bad_body.model, nullptr);
  const Refusal unknown =
      ask("Bearer sk-app", R"({"model":"nope","messages":[{"role":"user","content":"hi"}]})");
  EXPECT_EQ(refused_as(unknown), Refused::kNotFound);
  EXPECT_EQ(unknown.model, nullptr);
  const Refusal forbidden =
      ask("Bearer sk-app", R"({"model":"other","messages":[{"role":"user","content":"hi"}]})");
  EXPECT_EQ(refused_as(forbidden), Refused::kModelNotAllowed);
  ASSERT_NE(forbidden.model, nullptr);
  EXPECT_EQ(forbidden.model->name, "other");
  ASSERT_TRUE(std::holds_alternative<Admitted>(
      admit(chat_completions_api(), head(), kBody, *cfg(), keys, "v")));
  const Refusal limited = ask("Bearer sk-app", kBody);
  EXPECT_EQ(refused_as(limited), Refused::kRateLimited);
  ASSERT_NE(limited.model, nullptr);
  EXPECT_EQ(limited.model->name, "chat");
  // What the shared state refuses with, by its error.
  EXPECT_EQ(refused_as(ApiError{503, "service_unavailable", "x", std::nullopt,
                                "shared_state_unavailable", 1},
                       std::nullopt),
            Refused::kSharedStateUnavailable);
  // ...whatever the key's reason its caller read into it (rejection_of).
  EXPECT_EQ(refused_as(ApiError{503, "service_unavailable", "x", std::nullopt,
                                "shared_state_unavailable", 1},
                       AuthRejection::kRateLimited),
            Refused::kSharedStateUnavailable);
  EXPECT_EQ(
      refused_as(ApiError{429, "insufficient_quota", "x", std::nullopt, "insufficient_quota", 1},
                 AuthRejection::kBudgetExhausted),
      Refused::kBudgetExhausted);
  EXPECT_STREQ(to_string(Refused::kSharedStateUnavailable), "shared_state_unavailable");
}

}  // namespace
}  // namespace llmgate::gateway
