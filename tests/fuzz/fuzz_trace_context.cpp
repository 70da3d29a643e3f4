// W3C Trace Context over arbitrary headers: traceparent parses only to a
// valid context that formats back to an equal one (version 00, no
// surrounding space); tracestate cleaning is idempotent and bounded; the
// sampler's parser never crashes and its samplers decide deterministically.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gateway/observe/trace_context.h"
#include "tests/fuzz/fuzz_check.h"

using namespace llmgate::gateway;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto c = parse_traceparent(text)) {
    FUZZ_CHECK(c->trace.valid() && c->span.valid());
    const std::string again = format_traceparent(*c);
    FUZZ_CHECK(again.size() == 55);
    FUZZ_CHECK(parse_traceparent(again) == c);
  }
  const std::string state = clean_tracestate(text);
  FUZZ_CHECK(state.size() <= 512);
  FUZZ_CHECK(clean_tracestate(state) == state);
  // "<sampler name>\n<argument>\n<32 hex trace id>"
  const auto nl = text.find('\n');
  if (nl != std::string_view::npos) {
    std::string error;
    const auto rest = text.substr(nl + 1);
    const auto nl2 = rest.find('\n');
    if (auto s =
            llmgate::config::parse_trace_sampler(text.substr(0, nl), rest.substr(0, nl2), &error)) {
      FUZZ_CHECK(s->ratio >= 0 && s->ratio <= 1);
      const auto ctx =
          parse_traceparent("00-" + std::string(rest.substr(nl2 + 1)) + "-00f067aa0ba902b7-01");
      if (ctx) {
        FUZZ_CHECK(sample_trace(*s, nullptr, ctx->trace) == sample_trace(*s, nullptr, ctx->trace));
        FUZZ_CHECK(!s->parent_based || sample_trace(*s, &*ctx, ctx->trace));
      }
    } else {
      FUZZ_CHECK(!error.empty());
    }
  }
  return 0;
}
