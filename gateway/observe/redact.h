// Scrubbing of secrets from text that leaves the gateway's hands: upstream
// error messages before they are logged, upstream 4xx bodies before they are
// passed to the caller. Beast-free and pure (tests/unit/gateway/redact_test,
// tests/fuzz/fuzz_redact).
//
// What counts as a secret:
//   - the operator's own provider keys, wherever they occur (`known`);
//   - a token that starts like a vendor's key (sk-, sk_, gsk_, xai-, AIza,
//     hf_, r8_, ghp_, github_pat_, glpat-, AKIA, key-, ...), masked or not:
//     OpenAI's 401 says "Incorrect API key provided: sk-proj-****...XYZ",
//     i.e. the start and the end of the operator's key;
//   - what follows "Bearer ";
//   - any other run of 32 or more token characters that mixes letters and
//     digits (an opaque credential more often than not).
// Each becomes "[redacted]". A request id can be caught by the last rule;
// in an error message that is a small loss against a leaked key.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace llmgate::gateway {

inline constexpr std::string_view kRedacted = "[redacted]";

std::string redact_secrets(std::string_view text, std::span<const std::string> known = {});

}  // namespace llmgate::gateway
