// For the tests of a translator whose conversation is written from the
// client's text (anthropic_conversation.h, gemini_conversation.h): that it
// answers what clients send as the document's translation does, and leaves
// the rest to it.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <variant>

#include "providers/request_body.h"
#include "providers/upstream_protocol.h"

namespace llmgate::providers::text_writer {

using Body = std::variant<std::string, Untranslatable>;

// The client's own text indexed, escapes and all (RequestBody::from would
// write it anew).
inline RequestBody indexed(const char* client) {
  return std::get<RequestBody>(RequestBody::parse(client));
}

// Each of `written` is answered (not declined), with the document
// translation's refusal or a body that parses as its body does; each of
// `declined` is declined.
template <class Write, class Translate>
void expect_as_translated(Write write, Translate translate, const UpstreamRequest& r,
                          std::span<const char* const> written,
                          std::span<const char* const> declined) {
  for (const char* client : written) {
    const std::optional<Body> text = write(indexed(client), r);
    ASSERT_TRUE(text.has_value()) << client;
    const Body ref = translate(nlohmann::json::parse(client), r);
    ASSERT_EQ(text->index(), ref.index()) << client;
    if (const auto* u = std::get_if<Untranslatable>(&ref)) {
      EXPECT_EQ(std::get<Untranslatable>(*text).message, u->message) << client;
      EXPECT_EQ(std::get<Untranslatable>(*text).param, u->param) << client;
    } else {
      EXPECT_EQ(nlohmann::json::parse(std::get<std::string>(*text)),
                nlohmann::json::parse(std::get<std::string>(ref)))
          << client;
    }
  }
  for (const char* client : declined) EXPECT_FALSE(write(indexed(client), r).has_value()) << client;
}

}  // namespace llmgate::providers::text_writer
