// Fuzzes the paths and queries that name a stored response (Responses API):
// gateway::request_path(target), gateway::response_path(path) and
// gateway::responses_query(target), on the request target as a client sends
// it.
//
// Findings: an exception, a sanitizer report, or a broken invariant:
//   - an id response_path accepts is 1..kMaxIdBytes of [A-Za-z0-9_.:-], not
//     "." or "..", and the path rebuilt from it names the same response;
//   - responses_query keeps only allowed parameters, each as the client wrote
//     it, in its order, and never anything of a fragment.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gateway/http/headers.h"
#include "gateway/proxy/response_owners.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using llmgate::gateway::ResponseOwners;
using llmgate::gateway::ResponsePath;

bool id_char(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.' || c == ':';
}

void check_path(std::string_view path) {
  const auto r = llmgate::gateway::response_path(path);
  if (!r) return;
  FUZZ_CHECK(!r->id.empty() && r->id.size() <= ResponseOwners::kMaxIdBytes);
  FUZZ_CHECK(r->id != "." && r->id != "..");
  for (unsigned char c : r->id) FUZZ_CHECK(id_char(c));
  // The id and part come from the path: rebuilt, it names the same response.
  const std::string rebuilt =
      "/v1/responses/" + r->id + std::string(llmgate::gateway::part_path(r->part));
  const auto again = llmgate::gateway::response_path(rebuilt);
  FUZZ_CHECK(again && again->id == r->id && again->part == r->part);
  FUZZ_CHECK(path.find(r->id) != std::string_view::npos);
}

void check_query(std::string_view target) {
  const std::string q = llmgate::gateway::responses_query(target);
  const auto at = target.find('?');
  if (at == std::string_view::npos) {
    FUZZ_CHECK(q.empty());
    return;
  }
  std::string_view client = target.substr(at + 1);
  client = client.substr(0, client.find('#'));
  FUZZ_CHECK(q.find('#') == std::string::npos);  // nothing of a fragment
  // Each kept parameter is one of the client's, in order.
  std::string_view rest = q;
  std::size_t from = 0;
  while (!rest.empty()) {
    const auto amp = rest.find('&');
    const std::string_view param = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    FUZZ_CHECK(!param.empty());
    const std::string_view name = param.substr(0, param.find('='));
    FUZZ_CHECK(name == "stream" || name == "starting_after" || name == "include" ||
               name == "include[]" || name == "include%5B%5D" || name == "after" ||
               name == "before" || name == "limit" || name == "order");
    const auto found = client.find(param, from);
    FUZZ_CHECK(found != std::string_view::npos);
    from = found + param.size();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view target(reinterpret_cast<const char*>(data), size);
  if (auto path = llmgate::gateway::request_path(target)) check_path(*path);
  check_path(target);
  check_query(target);
  return 0;
}
