// A client's chunked request body fed to the request parser
// (request_parser.h) with the limits Beast 1.81's basic_parser does not
// apply: it keeps a chunk line (size and extensions) until the line's end
// arrives, and the last chunk's trailer section until all of it has,
// whatever their size (header_limit covers the head only, body_limit the
// chunk data only). (The parser drops the trailer fields.)
// Includes Beast: include only from gateway sources that already do.
#pragma once

#include <boost/beast/core/flat_buffer.hpp>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gateway/server/request_parser.h"

namespace llmgate::gateway {

// The longest chunk line a request may send: size, extensions and CRLF
// (extensions are read and ignored; the chunk size alone takes 16 digits).
inline constexpr std::size_t kMaxChunkLineBytes = 4096;

// Which limit the bytes a chunked body's parser has left unparsed pass, if
// any. `pending` is what the parser waits for the rest of: a chunk line (after
// the CRLF that ends the previous chunk's data), or the last chunk's line and
// the start of the trailer section. The chunk line counts its CRLF; the
// trailer section its fields and the blank line that ends it.
enum class ChunkedOverrun { kNone, kChunkLine, kTrailers };
ChunkedOverrun chunked_overrun(std::string_view pending, std::size_t max_chunk_line,
                               std::size_t max_trailers);

// Puts a chunked body's bytes into `parser` (whose head is done, its body
// not begun) as they arrive. The reader is the parser's chunk-header
// callback, which Beast keeps a reference to and cannot drop once the body
// has begun: the parser must be given no byte after the reader is gone.
class ChunkedBodyReader {
 public:
  enum class Status {
    kDone,       // the body is whole (trailer fields parsed and dropped by the parser)
    kNeedMore,   // read more into the buffer and put again
    kError,      // Beast refused the bytes: `ec` says why
    kChunkLine,  // a chunk line is longer than the limit
    kTrailers,   // the trailer section is larger than the limit
  };

  ChunkedBodyReader(RequestParser& parser, std::size_t max_trailers,
                    std::size_t max_chunk_line = kMaxChunkLineBytes);
  ChunkedBodyReader(const ChunkedBodyReader&) = delete;
  ChunkedBodyReader& operator=(const ChunkedBodyReader&) = delete;

  // Parses what `buffer` holds and consumes what was parsed. Every chunk
  // line and the trailer section, whole or still arriving (what is left in
  // the buffer), are within the limits, else kChunkLine or kTrailers.
  Status put(beast::flat_buffer& buffer, beast::error_code& ec);

  // Called by the parser at each chunk line.
  void operator()(std::uint64_t size, beast::string_view extensions, beast::error_code& ec);

 private:
  RequestParser& parser_;
  std::size_t max_trailers_, max_chunk_line_;
  // The bytes being put (what the callback's views point into).
  const char* put_begin_ = nullptr;
  const char* put_end_ = nullptr;
  // What a limit passed in the callback makes put() return (kError: none).
  Status overrun_ = Status::kError;
  bool last_chunk_ = false;  // the last chunk's line has been seen
};

}  // namespace llmgate::gateway
