// redact_secrets over arbitrary text: never crashes, never lets a known
// secret through, is idempotent, and leaves text without credentials as it is.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gateway/observe/redact.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // The first line (if any) is a known secret, the rest the text around it.
  const auto nl = text.find('\n');
  const std::string secret(nl == std::string_view::npos ? std::string_view{} : text.substr(0, nl));
  const std::string body(nl == std::string_view::npos ? text : text.substr(nl + 1));
  const std::string known[] = {secret};
  const std::string once = llmgate::gateway::redact_secrets(body, known);
  // A secret of 8 or more characters never survives, not even rebuilt from
  // the marker and its neighbours (one that is part of the marker itself
  // cannot be told from it, and is no provider's key).
  if (secret.size() >= 8 &&
      std::string_view(llmgate::gateway::kRedacted).find(secret) == std::string_view::npos) {
    FUZZ_CHECK(once.find(secret) == std::string::npos);
  }
  FUZZ_CHECK(llmgate::gateway::redact_secrets(once, known) == once);
  // Words without digits, capitals or punctuation pass unchanged.
  bool plain = true;
  for (char c : body) plain = plain && (c == ' ' || (c >= 'a' && c <= 'j'));
  if (plain) FUZZ_CHECK(llmgate::gateway::redact_secrets(body) == body);
  return 0;
}
