// Beast's assertions stay on in the fuzz targets, but for one: 1.81's
// parse_chunk_header asserts `n >= 5` when a final chunk's header is resumed
// before the blank line after it has all arrived ("0\r\n\r" in one read);
// without NDEBUG that aborts, with it (the gateway's builds) the code goes on
// to its need-more path, as the next read completes the message
// (tests/fuzz/findings: upstream_parser-beast-final-chunk-assert). Every
// other failed assertion is a finding. Defines boost's handlers: include it
// from one source of a target only.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace boost {
void assertion_failed(char const* expr, char const* function, char const* file, long line) {
  if (std::strcmp(expr, "n >= 5") == 0 && std::strstr(file, "beast/http/impl/basic_parser.ipp"))
    return;
  std::fprintf(stderr, "%s:%ld: %s: Assertion `%s' failed.\n", file, line, function, expr);
  std::abort();
}
void assertion_failed_msg(char const* expr, char const* msg, char const* function, char const* file,
                          long line) {
  std::fprintf(stderr, "%s:%ld: %s: Assertion `%s' failed: %s\n", file, line, function, expr, msg);
  std::abort();
}
}  // namespace boost
