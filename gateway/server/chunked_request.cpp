#include "gateway/server/chunked_request.h"

#include <boost/beast/http/error.hpp>

namespace llmgate::gateway {
namespace {

bool is_hex_digit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

}  // namespace
ChunkedOverrun chunked_overrun(std::string_view pending, std::size_t max_chunk_line,
                               std::size_t max_trailers) {
  // Beast reads the CRLF after a chunk's data with the next chunk line.
  if (pending.substr(0, 2) == "\r\n") pending.remove_prefix(2);
  const std::size_t eol = pending.find("\r\n");  // Beast's line end (a bare LF is not one)
  if (eol == std::string_view::npos) {
    return pending.size() > max_chunk_line ? ChunkedOverrun::kChunkLine : ChunkedOverrun::kNone;
  }
  const std::size_t line = eol + 2;
  if (line > max_chunk_line) return ChunkedOverrun::kChunkLine;
  // The parser leaves a whole line unparsed only when it is the last chunk's
  // (a chunk with data is parsed as soon as its line is whole): the trailer
  // section follows, and is not whole yet.
  return pending.size() - line > max_trailers ? ChunkedOverrun::kTrailers : ChunkedOverrun::kNone;
}

ChunkedBodyReader::ChunkedBodyReader(RequestParser& parser, std::size_t max_trailers,
                                     std::size_t max_chunk_line)
    : parser_(parser), max_trailers_(max_trailers), max_chunk_line_(max_chunk_line) {
  parser_.on_chunk_header(*this);
  parser_.eager(true);
}

void ChunkedBodyReader::operator()(std::uint64_t size, beast::string_view extensions,
                                   beast::error_code& ec) {
  ec = {};
  // A line or a trailer section that arrived whole in one read is parsed
  // before put() sees what is left: measured here, in the bytes being put
  // (`extensions` is a view of them; the size's digits come before it, and
  // before those the previous line's LF or the start of the bytes).
  const char* const ext_end = extensions.data() + extensions.size();
  const char* line = extensions.data();
  while (line > put_begin_ && is_hex_digit(line[-1])) --line;
  if (static_cast<std::size_t>(ext_end + 2 - line) > max_chunk_line_) {
    overrun_ = Status::kChunkLine;
    ec = http::error::bad_chunk_extension;  // stops the parser; put() reports overrun_
    return;
  }
  if (size != 0 || last_chunk_) return;
  last_chunk_ = true;
  // The last chunk: Beast has found the end of the trailer section (the
  // first blank line after this one) and parses its fields next.
  const std::string_view after(ext_end, static_cast<std::size_t>(put_end_ - ext_end));
  const std::size_t blank = after.find("\r\n\r\n");
  if (blank != std::string_view::npos && blank + 2 > max_trailers_) {
    overrun_ = Status::kTrailers;
    ec = http::error::header_limit;
    return;
  }
}

ChunkedBodyReader::Status ChunkedBodyReader::put(beast::flat_buffer& buffer,
                                                 beast::error_code& ec) {
  ec = {};
  while (buffer.size() > 0 && !parser_.is_done()) {
    put_begin_ = static_cast<const char*>(buffer.data().data());
    put_end_ = put_begin_ + buffer.size();
    const std::size_t n = parser_.put(buffer.data(), ec);
    buffer.consume(n);
    if (ec == http::error::need_more) {
      ec = {};
      break;
    }
    if (ec) {
      if (overrun_ != Status::kError) ec = {};
      return overrun_;
    }
    if (n == 0) break;
  }
  if (parser_.is_done()) return Status::kDone;
  const std::string_view pending(static_cast<const char*>(buffer.data().data()), buffer.size());
  switch (chunked_overrun(pending, max_chunk_line_, max_trailers_)) {
    case ChunkedOverrun::kChunkLine:
      return Status::kChunkLine;
    case ChunkedOverrun::kTrailers:
      return Status::kTrailers;
    case ChunkedOverrun::kNone:
      break;
  }
  return Status::kNeedMore;
}

}  // namespace llmgate::gateway
