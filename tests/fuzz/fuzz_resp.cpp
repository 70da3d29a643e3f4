// libFuzzer target for the RESP2 reply parser (gateway/shared/resp.cpp): whatever a
// server (or something pretending to be one) sends, parse() returns a value,
// "need more" or an error — never a crash, a hang or a read past the input —
// and a value it returns encodes back to exactly the bytes it consumed when
// those bytes were canonical, and always re-parses to itself.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "gateway/shared/resp.h"

using llmgate::gateway::resp::append_value;
using llmgate::gateway::resp::parse;
using llmgate::gateway::resp::Status;
using llmgate::gateway::resp::Value;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  // Parse a stream of values, as the connection does.
  for (int n = 0; n < 64 && !in.empty(); ++n) {
    Value v;
    std::size_t used = 0;
    std::string err;
    const Status s = parse(in, v, used, err);
    if (s != Status::kValue) {
      FUZZ_CHECK(used == 0);
      FUZZ_CHECK(s == Status::kNeedMore || !err.empty());
      break;
    }
    FUZZ_CHECK(used > 0 && used <= in.size());
    // Oracle: the value's own encoding parses back to the same value, whole.
    std::string wire;
    append_value(wire, v);
    Value again;
    std::size_t used2 = 0;
    std::string err2;
    FUZZ_CHECK(parse(wire, again, used2, err2) == Status::kValue);
    FUZZ_CHECK(used2 == wire.size());
    FUZZ_CHECK(again == v);
    // Every strict prefix of that encoding needs more (the reader waits, never misparses).
    if (wire.size() < 512) {
      for (std::size_t k = 0; k < wire.size(); ++k) {
        Value p;
        std::size_t u = 0;
        std::string e;
        FUZZ_CHECK(parse(std::string_view(wire).substr(0, k), p, u, e) == Status::kNeedMore);
      }
    }
    in.remove_prefix(used);
  }
  return 0;
}
