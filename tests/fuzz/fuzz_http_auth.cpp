// Authorization header values: Bearer and Basic credentials never crash or
// read past the value; a Basic password is never longer than its base64
// could hold; and base64 of any "user:password" the fuzzer makes decodes
// back to exactly that password (after the first colon).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gateway/access/http_auth.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/support/base64.h"

using namespace llmgate::gateway;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // As a header value.
  const std::string_view key = bearer(text);
  FUZZ_CHECK(key.size() <= text.size());
  FUZZ_CHECK(key.empty() || (key.front() != ' ' && key.back() != ' '));
  if (auto p = basic_password(text)) FUZZ_CHECK(p->size() * 4 <= text.size() * 3);
  // As the decoded credentials.
  if (text.size() <= 700) {
    const auto colon = text.find(':');
    const auto got = basic_password("Basic " + llmgate::testing::base64(text));
    if (colon == std::string_view::npos) {
      FUZZ_CHECK(!got);
    } else {
      FUZZ_CHECK(got && *got == text.substr(colon + 1));
    }
  }
  return 0;
}
