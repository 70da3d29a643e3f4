#include "gateway/observe/redact.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace llmgate::gateway {
namespace {

TEST(Redact, OpenAisMaskedKeyInA401IsRemoved) {
  const std::string msg =
      "Incorrect API key provided: sk-proj-********************************************XYZa. You "
      "can find your API key at https://platform.openai.com/account/api-keys.";
  const std::string out = redact_secrets(msg);
  EXPECT_EQ(out.find("sk-proj"), std::string::npos) << out;
  EXPECT_EQ(out.find("XYZa"), std::string::npos) << out;
  EXPECT_NE(out.find("Incorrect API key provided: [redacted]. You can find"), std::string::npos)
      << out;
}

TEST(Redact, KnownProviderKeysAreRemovedWherever) {
  const std::vector<std::string> known = {"plainsecretvalue"};
  EXPECT_EQ(redact_secrets("x=plainsecretvalue;y=plainsecretvalue", known),
            "x=[redacted];y=[redacted]");
}

TEST(Redact, VendorPrefixesAndBearerTokens) {
  EXPECT_EQ(redact_secrets("key gsk_abcdef123 bad"), "key [redacted] bad");
  EXPECT_EQ(redact_secrets("API key not valid: AIzaSyA-bcdefgh"), "API key not valid: [redacted]");
  EXPECT_EQ(redact_secrets("Authorization: Bearer abc"), "Authorization: Bearer [redacted]");
  EXPECT_EQ(redact_secrets("token hf_abcdefgh."), "token [redacted].");
}

TEST(Redact, LongOpaqueTokensAreRemoved) {
  EXPECT_EQ(redact_secrets("id 0123456789abcdef0123456789abcdef!"), "id [redacted]!");
}

TEST(Redact, OrdinaryTextIsLeftAlone) {
  for (const std::string text :
       {"The model `gpt-4o` does not exist", "task-1 failed: invalid 'tools[0].function.name'",
        "max_tokens is too large: 100000. This model supports at most 4096 completion tokens.",
        "a very long word without any digits at all: supercalifragilisticexpialidocious"}) {
    EXPECT_EQ(redact_secrets(text), text);
  }
}

TEST(Redact, IsIdempotent) {
  const std::string once = redact_secrets("Bearer sk-abcdef and sk-proj-****1234");
  EXPECT_EQ(redact_secrets(once), once);
}

}  // namespace
}  // namespace llmgate::gateway
