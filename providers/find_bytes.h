// Where a short byte string first occurs in a text, for the scans of a
// request body that look for one (a base64 `"data:` URL, a `"cache_control"`
// mark): a JSON body is mostly quotes and letters, where memmem's and
// string_view::find's first-byte candidates are many. Sixteen positions at a
// time with SSE2, compared at two of the needle's bytes at once (W. Muła's
// "SIMD-friendly algorithms for substring searching"); only where both match
// is the rest compared. Beast-free, allocation-free.
#pragma once

#include <bit>
#include <cstddef>
#include <cstring>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace llmgate::providers {

// The first `needle` in `text` at or after `from`, or npos. `needle` has at
// least two bytes.
inline std::size_t find_bytes(std::string_view text, std::string_view needle,
                              std::size_t from = 0) {
  const std::size_t k = needle.size();
  if (k < 2 || from > text.size() || text.size() - from < k) return std::string_view::npos;
  // The two bytes compared first: the first and the last, unless they are
  // alike (a quoted word): then the ones inside them.
  std::size_t a = 0, b = k - 1;
  if (needle[a] == needle[b] && k > 3) {
    a = 1;
    b = k - 2;
  }
  const char* const t = text.data();
  const std::size_t last = text.size() - k;  // the last position a match may start
  std::size_t i = from;
#if defined(__SSE2__)
  const __m128i first = _mm_set1_epi8(needle[a]), second = _mm_set1_epi8(needle[b]);
  while (i + 16 <= last + 1) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(t + i + a));
    const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(t + i + b));
    auto mask = static_cast<unsigned>(
        _mm_movemask_epi8(_mm_and_si128(_mm_cmpeq_epi8(x, first), _mm_cmpeq_epi8(y, second))));
    while (mask != 0) {
      const std::size_t at = i + static_cast<std::size_t>(std::countr_zero(mask));
      if (std::memcmp(t + at, needle.data(), k) == 0) return at;
      mask &= mask - 1;
    }
    i += 16;
  }
#endif
  for (; i <= last; ++i) {
    if (t[i + a] == needle[a] && t[i + b] == needle[b] && std::memcmp(t + i, needle.data(), k) == 0)
      return i;
  }
  return std::string_view::npos;
}

}  // namespace llmgate::providers
