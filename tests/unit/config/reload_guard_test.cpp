#include "config/reload_guard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/config/config_test_support.h"

namespace llmgate::config {
namespace {

using ::testing::HasSubstr;

const std::string kProviders = R"yaml(
providers:
  - {name: p, base_url: "http://127.0.0.1:9000/v1"}
)yaml";
const std::string kModels = "models:\n  - {name: chat, deployments: [{provider: p, model: up}]}\n";
const std::string kKeys = "auth:\n  admin_key_sha256: " + std::string(64, 'b') +
                          "\n  keys: [{name: app, sha256: " + std::string(64, 'a') + "}]\n";

std::optional<std::string> refusal(const std::string& running, const std::string& next) {
  return reload_refusal(*testing::parse(running), *testing::parse(next));
}

TEST(ReloadGuard, AConfigThatLosesItsKeysByAccidentIsRefused) {
  const std::string running = kProviders + kModels + kKeys;
  // The part of the file before auth: (a half-written file).
  EXPECT_THAT(refusal(running, kProviders + kModels).value_or(""),
              HasSubstr("auth: {enabled: false}"));
  // Saying so is accepted.
  EXPECT_EQ(refusal(running, kProviders + kModels + "auth: {enabled: false}\n"), std::nullopt);
}

TEST(ReloadGuard, LosingTheAdminKeyNeedsToBeSaid) {
  const std::string running = kProviders + kModels + kKeys;
  const std::string keys_only =
      "auth:\n  keys: [{name: app, sha256: " + std::string(64, 'a') + "}]\n";
  EXPECT_THAT(refusal(running, kProviders + kModels + keys_only).value_or(""),
              HasSubstr("admin_open: true"));
  EXPECT_EQ(refusal(running, kProviders + kModels + keys_only + "  admin_open: true\n"),
            std::nullopt);
}

TEST(ReloadGuard, AnEmptyFileIsRefusedButAnExplicitEmptyModelListIsNot) {
  const std::string running = kProviders + kModels;
  EXPECT_THAT(refusal(running, "").value_or(""), HasSubstr("models: []"));
  EXPECT_THAT(refusal(running, kProviders).value_or(""), HasSubstr("models: []"));
  EXPECT_EQ(refusal(running, kProviders + "models: []\n"), std::nullopt);
}

TEST(ReloadGuard, OrdinaryChangesPass) {
  const std::string running = kProviders + kModels + kKeys;
  EXPECT_EQ(refusal(running, running + "timeouts: {ttft: 5s}\n"), std::nullopt);
  EXPECT_EQ(refusal(kProviders + kModels, kProviders + kModels + kKeys),
            std::nullopt);  // tightening
  EXPECT_EQ(refusal("", kProviders + kModels), std::nullopt);
}

}  // namespace
}  // namespace llmgate::config
