// The prompt's size before any provider counts it: the body's bytes, with
// inline media (data: URLs) counted apart.
#include "providers/prompt_size.h"

#include <gtest/gtest.h>

#include <string>

#include "providers/find_bytes.h"

namespace llmgate::providers {
namespace {

TEST(PromptSize, ABodyWithoutMediaIsItsBytes) {
  const std::string body = R"({"model":"m","messages":[{"role":"user","content":"hello there"}]})";
  const PromptSize s = measure_prompt(body);
  EXPECT_EQ(s.bytes, body.size());
  EXPECT_EQ(s.media, 0u);
  EXPECT_EQ(s.tokens(4.0), static_cast<std::int64_t>(body.size() / 4));
}

TEST(PromptSize, InlineMediaAreCountedApartFromText) {
  const std::string image = "\"data:image/png;base64," + std::string(40'000, 'A') + "\"";
  const std::string audio = "\"data:audio/wav;base64," + std::string(1'000, 'B') + "\"";
  const std::string body =
      R"({"messages":[{"role":"user","content":[{"type":"text","text":"what is it?"},)"
      R"({"type":"image_url","image_url":{"url":)" +
      image + R"(}},{"type":"input_audio","input_audio":{"data":)" + audio + R"(}}]}]})";
  const PromptSize s = measure_prompt(body);
  EXPECT_EQ(s.media, 2u);
  EXPECT_EQ(s.media_bytes, image.size() + audio.size());
  EXPECT_EQ(s.bytes, body.size() - image.size() - audio.size());
  EXPECT_EQ(s.tokens(4.0), static_cast<std::int64_t>(s.bytes / 4) + 2 * kMediaTokens);
}

TEST(PromptSize, TextThatMentionsDataUrlsIsText) {
  // Inside a string a quote is escaped: \"data:... is the text's, not a URL.
  const std::string quoted = R"({"messages":[{"role":"user","content":"say \"data:x\" twice"}]})";
  EXPECT_EQ(measure_prompt(quoted).media, 0u);
  EXPECT_EQ(measure_prompt(quoted).bytes, quoted.size());
  // An escaped backslash before a real quote: that quote does open a string.
  const std::string after_backslash = R"({"a":"x\\","b":"data:image/png;base64,AAAA"})";
  EXPECT_EQ(measure_prompt(after_backslash).media, 1u);
  // A key is never media.
  const std::string key = R"({"data:weird key": 1})";
  EXPECT_EQ(measure_prompt(key).media, 0u);
  EXPECT_EQ(measure_prompt(key).bytes, key.size());
  // A remote image is the characters of its URL.
  const std::string remote =
      R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x.test/a.png"}}]}]})";
  EXPECT_EQ(measure_prompt(remote).media, 0u);
}

TEST(PromptSize, EveryCutOfATruncatedBodyIsCountedWithoutReadingPastIt) {
  const std::string body =
      R"({"c":["data:;base64,aa","data:x;base64,b\"c",{"data:k;base64,":"data:;base64,v"}],"d":"x"})";
  for (std::size_t n = 0; n <= body.size(); ++n) {
    const PromptSize s = measure_prompt(std::string_view(body).substr(0, n));
    EXPECT_EQ(s.bytes + s.media_bytes, n) << n;
  }
  const PromptSize whole = measure_prompt(body);
  EXPECT_EQ(whole.media, 3u);  // the three values; not the key
  // A text that starts with "data:" is text (pasted SSE, say).
  EXPECT_EQ(measure_prompt(R"({"content":"data: {\"a\":1}\n\ndata: [DONE]"})").media, 0u);
}

// The needle search the body scans use finds what string_view::find finds,
// at every offset around its sixteen-byte blocks, near the text's end, and
// when it is not there.
TEST(FindBytes, FindsWhatFindFindsAtEveryOffset) {
  for (const std::string& needle : {std::string("\"data:"), std::string("\"cache_control\""),
                                    std::string("\"\""), std::string("aba")}) {
    for (std::size_t at = 0; at < 40; ++at) {
      for (std::size_t tail = 0; tail < 20; ++tail) {
        // Near misses before it: the needle's first and last bytes apart.
        std::string text = std::string(at, '"') + needle + std::string(tail, 'a');
        for (std::size_t from : {std::size_t{0}, at, at + 1, text.size()})
          EXPECT_EQ(find_bytes(text, needle, from), std::string_view(text).find(needle, from))
              << needle << " at " << at << " from " << from;
        text[at + needle.size() - 1] = 'x';  // one byte off: nowhere
        EXPECT_EQ(find_bytes(text, needle), std::string_view(text).find(needle)) << needle;
      }
    }
  }
  EXPECT_EQ(find_bytes("abc", "abcd"), std::string_view::npos);
  EXPECT_EQ(find_bytes("abc", "bc", 5), std::string_view::npos);
}

}  // namespace
}  // namespace llmgate::providers
