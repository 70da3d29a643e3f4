// The failover policy without a socket: every upstream-fault row of
// docs/failure-semantics.md reduced to what the proxy observes (a fault or a
// status, before or after the commit) and what the policy makes of it.
#include "gateway/proxy/failover_policy.h"

#include <gtest/gtest.h>

namespace llmgate::gateway::failover {
namespace {

using namespace std::chrono_literals;
using routing::AttemptRecord;

const Clock::time_point kT0{std::chrono::seconds(1000)};

config::Timeouts timeouts(std::chrono::milliseconds ttft = 600ms) {
  config::Timeouts t;
  t.connect = 300ms;
  t.ttft = ttft;
  t.idle = 600ms;
  t.total = 3s;
  return t;
}

FaultReport judge(Fault f, bool first_token, std::string_view text = "",
                  Clock::time_point now = kT0 + 1s) {
  const Deadlines d(timeouts(), kT0 + 3s);
  return judge_fault(f, FaultContext{d, now, first_token, 65536, text});
}

// --- Before the first token: every fault fails over, as this outcome. -----
struct BeforeRow {
  const char* id;  // the docs/failure-semantics.md row
  Fault fault;
  AttemptOutcome outcome;
};
class BeforeFirstToken : public ::testing::TestWithParam<BeforeRow> {};

TEST_P(BeforeFirstToken, IsCountedAsTheDocumentSays) {
  const auto& row = GetParam();
  FaultReport r = judge(row.fault, /*first_token=*/false, "boom");
  EXPECT_EQ(r.outcome, row.outcome) << row.id;
  EXPECT_FALSE(r.detail.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Rows, BeforeFirstToken,
    ::testing::Values(
        BeforeRow{"reset-before-headers", Fault::kHeadCut, AttemptOutcome::kTruncated},
        BeforeRow{"headers-then-silence", Fault::kReadTimeout, AttemptOutcome::kTtftTimeout},
        BeforeRow{"role-chunk-then-silence", Fault::kReadTimeout, AttemptOutcome::kTtftTimeout},
        BeforeRow{"trickle-before-first-token", Fault::kHeadTimeout, AttemptOutcome::kTtftTimeout},
        BeforeRow{"cut-before-first-token", Fault::kCut, AttemptOutcome::kTruncated},
        BeforeRow{"non-sse-body", Fault::kEndedWithoutFinish, AttemptOutcome::kTruncated},
        BeforeRow{"malformed-event-before-first-token", Fault::kMalformedEvent,
                  AttemptOutcome::kMalformed},
        BeforeRow{"event-too-large", Fault::kEventTooLarge, AttemptOutcome::kMalformed},
        BeforeRow{"wrong-content-type", Fault::kNotEventStream, AttemptOutcome::kMalformed},
        BeforeRow{"in-band-error", Fault::kInBandError, AttemptOutcome::kMalformed}),
    [](const auto& info) {
      std::string s = info.param.id;
      for (char& c : s)
        if (c == '-') c = '_';
      return s;
    });

// --- After the first token: the error event that ends the client's stream. --
struct AfterRow {
  const char* id;
  Fault fault;
  AttemptOutcome outcome;
  int status;
  const char* code;
};
class AfterFirstToken : public ::testing::TestWithParam<AfterRow> {};

TEST_P(AfterFirstToken, EndsTheStreamWithThisErrorEvent) {
  const auto& row = GetParam();
  FaultReport r = judge(row.fault, /*first_token=*/true, "boom");
  EXPECT_EQ(r.outcome, row.outcome) << row.id;
  EXPECT_EQ(r.client_error.status, row.status) << row.id;
  EXPECT_EQ(r.client_error.code, row.code) << row.id;
  // The error event is an OpenAI error object, never [DONE].
  EXPECT_EQ(r.client_error.sse_event().rfind("data: {\"error\":", 0), 0u);
  EXPECT_EQ(r.client_error.sse_event().find("data: [DONE]"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, AfterFirstToken,
    ::testing::Values(AfterRow{"stall-after-tokens", Fault::kReadTimeout,
                               AttemptOutcome::kIdleTimeout, 504, "upstream_timeout"},
                      AfterRow{"cut-mid-event", Fault::kCut, AttemptOutcome::kTruncated, 502,
                               "upstream_stream_truncated"},
                      AfterRow{"ended-early", Fault::kEndedWithoutFinish,
                               AttemptOutcome::kTruncated, 502, "upstream_stream_truncated"},
                      AfterRow{"malformed-event-after-first-token", Fault::kMalformedEvent,
                               AttemptOutcome::kMalformed, 502, "upstream_malformed_event"},
                      AfterRow{"event-too-large-after", Fault::kEventTooLarge,
                               AttemptOutcome::kMalformed, 502, "upstream_event_too_large"},
                      AfterRow{"in-band-error-after", Fault::kInBandError,
                               AttemptOutcome::kMalformed, 502, "upstream_stream_error"}),
    [](const auto& info) {
      std::string s = info.param.id;
      for (char& c : s)
        if (c == '-') c = '_';
      return s;
    });

TEST(FailoverPolicy, ATimeoutAtTheRequestDeadlineIsATotalTimeout) {
  // trickle-after-first-token: each byte within the idle timeout, then the request deadline.
  EXPECT_EQ(judge(Fault::kReadTimeout, true, "", kT0 + 3s).outcome, AttemptOutcome::kTotalTimeout);
  EXPECT_EQ(judge(Fault::kReadTimeout, false, "", kT0 + 3s).outcome, AttemptOutcome::kTotalTimeout);
  EXPECT_EQ(judge(Fault::kHeadTimeout, false, "", kT0 + 3s).outcome, AttemptOutcome::kTotalTimeout);
  // A cut is a cut, whenever it happens.
  EXPECT_EQ(judge(Fault::kCut, true, "", kT0 + 3s).outcome, AttemptOutcome::kTruncated);
}

TEST(FailoverPolicy, TheUpstreamsOwnWordsNeverReachTheClient) {
  FaultReport r = judge(Fault::kInBandError, true, "invalid key sk-live-123");
  EXPECT_NE(r.detail.find("sk-live-123"), std::string::npos);  // the log (redacted by the caller)
  EXPECT_EQ(r.client_error.message.find("sk-live-123"), std::string::npos);
  EXPECT_EQ(r.client_error.body().find("sk-live-123"), std::string::npos);
}

TEST(FailoverPolicy, DetailsNameTheDeadlineThatWasMissed) {
  EXPECT_EQ(judge(Fault::kReadTimeout, false).detail,
            "no first token within the TTFT deadline of 600ms");
  EXPECT_EQ(judge(Fault::kReadTimeout, true).detail, "stream stalled: no data for 600ms");
  EXPECT_EQ(judge(Fault::kHeadTimeout, false).detail,
            "no response within the TTFT deadline of 600ms");
  EXPECT_EQ(
      judge(Fault::kNotEventStream, false, "\"application/json\" instead of text/event-stream")
          .detail,
      "upstream answered 200 with Content-Type \"application/json\" instead of text/event-stream");
}

// --- Statuses ---------------------------------------------------------------
TEST(FailoverPolicy, StatusesAboutTheDeploymentFailOverStatusesAboutTheRequestDoNot) {
  for (int s : {408, 429, 500, 502, 503, 504, 529, 401, 403, 404}) {
    EXPECT_EQ(judge_status(s), StatusVerdict::kFailOver) << s;
  }
  for (int s : {400, 409, 413, 415, 422})
    EXPECT_EQ(judge_status(s), StatusVerdict::kReturnToClient) << s;
  EXPECT_TRUE(needs_operator(401));
  EXPECT_TRUE(needs_operator(403));
  EXPECT_TRUE(needs_operator(404));
  EXPECT_FALSE(needs_operator(429));
  EXPECT_FALSE(needs_operator(500));
}

// --- Deadlines --------------------------------------------------------------
TEST(FailoverPolicy, EveryWaitEndsByTheRequestDeadline) {
  const Deadlines d(timeouts(), kT0 + 3s);
  EXPECT_EQ(d.connect(kT0), kT0 + 300ms);
  EXPECT_EQ(d.write(kT0), kT0 + 900ms);
  EXPECT_EQ(d.first_token(kT0 + 100ms), kT0 + 700ms);
  // Before the first token the read deadline stays the TTFT deadline however
  // many reads there are; after it, the idle timeout runs from each read.
  EXPECT_EQ(d.next_read(kT0 + 500ms, kT0 + 100ms, false), kT0 + 700ms);
  EXPECT_EQ(d.next_read(kT0 + 500ms, kT0 + 100ms, true), kT0 + 1100ms);
  // Capped by the total deadline.
  EXPECT_EQ(d.connect(kT0 + 2900ms), kT0 + 3s);
  EXPECT_EQ(d.next_read(kT0 + 2800ms, kT0 + 100ms, true), kT0 + 3s);
  EXPECT_FALSE(d.total_expired(kT0 + 2999ms));
  EXPECT_TRUE(d.total_expired(kT0 + 3s));
}

// --- Effects on health --------------------------------------------------------
AttemptRecord record(AttemptOutcome o, int status = 200) {
  AttemptRecord r;
  r.deployment = "bad/m";
  r.outcome = o;
  r.http_status = status;
  return r;
}

TEST(FailoverPolicy, TheClientsDoingAndLostHedgesSayNothingAboutTheDeployment) {
  for (auto o :
       {AttemptOutcome::kClientGone, AttemptOutcome::kClientError, AttemptOutcome::kHedgeLost}) {
    EXPECT_EQ(effects_of(record(o), 600ms, 600ms).health, HealthEffect::kNone)
        << routing::to_string(o);
  }
  EXPECT_EQ(effects_of(record(AttemptOutcome::kSuccess), 600ms, 600ms).health,
            HealthEffect::kSuccess);
  for (auto o :
       {AttemptOutcome::kConnectError, AttemptOutcome::kUpstreamStatus, AttemptOutcome::kTruncated,
        AttemptOutcome::kMalformed, AttemptOutcome::kIdleTimeout, AttemptOutcome::kTotalTimeout}) {
    EXPECT_EQ(effects_of(record(o), 600ms, 600ms).health, HealthEffect::kFailure)
        << routing::to_string(o);
  }
}

TEST(FailoverPolicy, MissingALiveDeadlineIsSlowMissingTheConfiguredOneIsAFailure) {
  // The router planned 200 ms from the deployment's own p95; the provider's timeout is 600 ms.
  EXPECT_EQ(effects_of(record(AttemptOutcome::kTtftTimeout), 200ms, 600ms).health,
            HealthEffect::kNone);
  EXPECT_EQ(effects_of(record(AttemptOutcome::kTtftTimeout), 600ms, 600ms).health,
            HealthEffect::kFailure);
}

// Stalls (docs/failure-semantics.md, "Stalls"): after the first token a
// read may wait the stall deadline while the attempt is replaceable (the
// client has seen nothing of it), else the idle timeout.
TEST(FailoverPolicy, AReplaceableStreamPausesUntilItsStallDeadlineACommittedOneUntilIdle) {
  const Deadlines d(timeouts(), kT0 + 3s, 200ms);
  EXPECT_EQ(d.pause(/*replaceable=*/true), 200ms);
  EXPECT_EQ(d.pause(/*replaceable=*/false), 600ms);
  EXPECT_TRUE(d.stall_derived(true));
  EXPECT_FALSE(d.stall_derived(false));
  EXPECT_EQ(d.next_read(kT0 + 1s, kT0, true, true), kT0 + 1s + 200ms);
  EXPECT_EQ(d.next_read(kT0 + 1s, kT0, true, false), kT0 + 1s + 600ms);
  EXPECT_EQ(d.next_read(kT0 + 1s, kT0, false, true), kT0 + 600ms);  // before: the TTFT deadline
  // No derived deadline, or one past the idle timeout: the idle timeout.
  EXPECT_EQ(Deadlines(timeouts(), kT0 + 3s).pause(true), 600ms);
  EXPECT_EQ(Deadlines(timeouts(), kT0 + 3s, 900ms).pause(true), 600ms);
  EXPECT_FALSE(Deadlines(timeouts(), kT0 + 3s, 900ms).stall_derived(true));
  // The detail names the deadline the stream missed.
  const auto r = judge_fault(Fault::kReadTimeout, FaultContext{d, kT0 + 1s, true, 65536, "", true});
  EXPECT_EQ(r.outcome, AttemptOutcome::kIdleTimeout);
  EXPECT_NE(r.detail.find("no data for 200ms (the stall deadline"), std::string::npos) << r.detail;
  // Given up at the derived deadline: slow, not broken; at the idle timeout: a failure.
  auto stalled = record(AttemptOutcome::kIdleTimeout);
  EXPECT_EQ(effects_of(stalled, 600ms, 600ms).health, HealthEffect::kFailure);
  stalled.stall_derived = true;
  EXPECT_EQ(effects_of(stalled, 600ms, 600ms).health, HealthEffect::kNone);
}

TEST(FailoverPolicy, RetryAfterOn429Or503Or529StartsACooldown) {
  auto r = record(AttemptOutcome::kUpstreamStatus, 429);
  EXPECT_FALSE(effects_of(r, 600ms, 600ms).cooldown);  // status-429-no-retry-after
  r.retry_after_s = 30;
  EXPECT_TRUE(effects_of(r, 600ms, 600ms).cooldown);  // status-429-retry-after-*
  r.http_status = 503;
  EXPECT_TRUE(effects_of(r, 600ms, 600ms).cooldown);
  r.http_status = 529;  // Anthropic's overloaded
  EXPECT_TRUE(effects_of(r, 600ms, 600ms).cooldown);
  r.http_status = 500;
  EXPECT_FALSE(effects_of(r, 600ms, 600ms).cooldown);
}

// --- The final error ----------------------------------------------------------
AttemptRecord failed(const char* dep, AttemptOutcome o, int status = 0,
                     std::optional<int> retry_after = {}) {
  AttemptRecord r = record(o, status);
  r.deployment = dep;
  r.detail = "the upstream said sk-secret";
  r.retry_after_s = retry_after;
  return r;
}

TEST(FailoverPolicy, AllFailedIsA502NamingOutcomesNotUpstreamWords) {
  FailureSummary s;
  s.failed(failed("a/m", AttemptOutcome::kConnectError));
  s.failed(failed("b/m", AttemptOutcome::kUpstreamStatus, 500));
  ApiError e = s.final_error("chat", 2, /*explain=*/false, false);
  EXPECT_EQ(e.status, 502);
  EXPECT_EQ(e.code, "upstream_unavailable");
  EXPECT_EQ(
      e.message,
      "all 2 upstream attempt(s) for model \"chat\" failed (connect_error, upstream_status(500))");
  EXPECT_EQ(e.message.find("sk-secret"), std::string::npos);
  EXPECT_EQ(s.final_error("chat", 2, /*explain=*/true, false).message,
            "all 2 upstream attempt(s) for model \"chat\" failed (a/m=connect_error, "
            "b/m=upstream_status(500))");
  EXPECT_EQ(s.header(), "a/m=connect_error, b/m=upstream_status(500)");
  EXPECT_EQ(s.log_field(), "a/m=connect_error,b/m=upstream_status(500)");
  EXPECT_EQ(s.detail(), "a/m: the upstream said sk-secret; b/m: the upstream said sk-secret");
}

TEST(FailoverPolicy, ALastTimeoutIsA504) {
  FailureSummary s;
  s.failed(failed("a/m", AttemptOutcome::kConnectError));
  s.failed(failed("b/m", AttemptOutcome::kTtftTimeout));
  EXPECT_EQ(s.final_error("chat", 2, false, false).status, 504);
  EXPECT_EQ(s.final_error("chat", 2, false, false).code, "upstream_timeout");
  FailureSummary t;
  t.failed(failed("a/m", AttemptOutcome::kConnectError));
  EXPECT_EQ(t.final_error("chat", 1, false, /*total_expired=*/true).status, 504);
}

TEST(FailoverPolicy, EveryAttemptRateLimitedIsA429WithTheShortestRetryAfter) {
  FailureSummary s;
  s.failed(failed("a/m", AttemptOutcome::kUpstreamStatus, 429, 30));
  s.failed(failed("b/m", AttemptOutcome::kUpstreamStatus, 429, 7));
  ApiError e = s.final_error("chat", 2, false, false);
  EXPECT_EQ(e.status, 429);
  EXPECT_EQ(e.code, "upstream_rate_limited");
  EXPECT_EQ(e.retry_after_s, 7);
  s.failed(failed("c/m", AttemptOutcome::kUpstreamStatus, 500));
  EXPECT_EQ(s.final_error("chat", 3, false, false).status, 502);
}

// A deployment skipped because its shared max_concurrent cannot be checked
// (shared_state down, on_failure: closed) is not at its limit: said so.
TEST(FailoverPolicy, EveryCandidateSkippedForWantOfTheSharedStateSaysSo) {
  FailureSummary s;
  s.shared_state_unavailable("up/conc");
  ApiError e = s.final_error("chat", 0, true, false);
  EXPECT_EQ(e.status, 503);
  EXPECT_EQ(e.code, "shared_state_unavailable");
  EXPECT_EQ(e.retry_after_s, 1);
  EXPECT_EQ(e.message.find("concurrency limit ("), std::string::npos) << e.message;
  EXPECT_EQ(s.header(), "up/conc=shared_state_unavailable");
  // Beside one that is saturated: saturation (both named in the header).
  s.saturated("other/m", "at its max_concurrent (1 in flight), wait queue full");
  e = s.final_error("chat", 0, true, false);
  EXPECT_EQ(e.code, "upstream_saturated");
  EXPECT_EQ(s.header(), "up/conc=shared_state_unavailable, other/m=saturated");
}

TEST(FailoverPolicy, EveryCandidateSaturatedIsA503WithRetryAfter) {
  FailureSummary s;
  s.saturated("bad/m", "at its max_concurrent (1 in flight), wait queue full");
  ApiError e = s.final_error("chat", 0, false, false);
  EXPECT_EQ(e.status, 503);
  EXPECT_EQ(e.code, "upstream_saturated");
  EXPECT_EQ(e.retry_after_s, 1);
  EXPECT_EQ(s.header(), "bad/m=saturated");
}

TEST(FailoverPolicy, NoAttemptBeforeTheDeadlineIsA504) {
  FailureSummary s;
  EXPECT_EQ(s.final_error("chat", 0, false, true).status, 504);
}

TEST(FailoverPolicy, AnExhaustedRetryBudgetIsSaid) {
  FailureSummary s;
  s.failed(failed("a/m", AttemptOutcome::kUpstreamStatus, 500));
  s.budget_exhausted();
  EXPECT_NE(s.final_error("chat", 1, false, false).message.find("retry budget is exhausted"),
            std::string::npos);
}

TEST(FailoverPolicy, TheFailedHeaderStaysShort) {
  FailureSummary s;
  for (int i = 0; i < 100; ++i)
    s.failed(failed("provider-with-a-long-name/model", AttemptOutcome::kConnectError));
  EXPECT_LE(s.header().size(), 560u);
}

}  // namespace
}  // namespace llmgate::gateway::failover
