#include "providers/sse_parser.h"

#include <algorithm>

namespace llmgate::providers {

std::span<char> SseParser::prepare(std::size_t n) {
  std::size_t moved = 0;
  const std::span<char> space = buf_.prepare(n, moved);
  // The line and the scan move with the event's bytes (with nothing
  // buffered, only a finished line can be pending: both at the end, which
  // moves to the front). Field spans are relative to the event's start and
  // stay valid.
  line_start_ -= moved;
  scan_ -= moved;
  return space;
}

void SseParser::shrink() {
  if (buf_.shrink()) line_start_ = scan_ = 0;
}

SseParser::Next SseParser::next(Frame& ev) {
  const char* b = buf_.data();
  while (scan_ < buf_.end()) {
    if (skip_lf_) {
      skip_lf_ = false;
      if (b[scan_] == '\n') {  // the LF of a CRLF already handled at the CR
        line_start_ = ++scan_;
        continue;
      }
    }
    // The next line end: LF, CR or CR LF.
    const char* from = b + scan_;
    std::size_t avail = buf_.end() - scan_;
    const char* lf = static_cast<const char*>(std::memchr(from, '\n', avail));
    std::size_t upto = lf ? static_cast<std::size_t>(lf - from) : avail;
    const char* cr = upto == 0 ? nullptr : static_cast<const char*>(std::memchr(from, '\r', upto));
    const char* term = cr ? cr : lf;
    if (!term) {
      scan_ = buf_.end();  // a partial line, all of it ordinary bytes
      if (buf_.buffered() > max_event_bytes_) {
        // read up to the first byte over the limit
        buf_.truncate_to(buf_.begin() + max_event_bytes_ + 1);
        return Next::kTooLarge;
      }
      return Next::kNeedMore;
    }
    const std::size_t t = static_cast<std::size_t>(term - b);
    if (t > line_start_ && t - buf_.begin() > max_event_bytes_) {
      buf_.truncate_to(buf_.begin() + max_event_bytes_ + 1);
      scan_ = std::min(scan_, buf_.end());
      return Next::kTooLarge;
    }
    skip_lf_ = *term == '\r';
    scan_ = t + 1;
    if (t > line_start_) {  // a field or comment line
      has_fields_ = true;
      process_field(line_start_, t);
      line_start_ = scan_;
      continue;
    }
    line_start_ = scan_;
    if (!has_fields_) {
      // A blank line with nothing before it (a stray separator) is dropped
      // rather than reported as an empty event.
      buf_.consume_to(scan_);
      continue;
    }
    ev.raw = std::string_view(b + buf_.begin(), scan_ - buf_.begin());
    ev.data = data_joined_ ? std::string_view(data_scratch_) : view(data_);
    ev.event = view(event_);
    ev.id = view(id_);
    ev.has_data = has_data_;
    buf_.consume_to(scan_);
    reset_event();
    return Next::kEvent;
  }
  return Next::kNeedMore;
}

void SseParser::process_field(std::size_t start, std::size_t end) {
  const char* b = buf_.data();
  if (b[start] == ':') return;  // comment
  // Most lines are "data:" ones: their colon is where it is, unsearched.
  constexpr std::string_view kData = "data:";
  const char* colon =
      end - start >= kData.size() && std::string_view(b + start, kData.size()) == kData
          ? b + start + kData.size() - 1
          : static_cast<const char*>(std::memchr(b + start, ':', end - start));
  std::size_t name_end = colon ? static_cast<std::size_t>(colon - b) : end;
  std::size_t value = colon ? name_end + 1 : end;
  if (value < end && b[value] == ' ') ++value;
  std::string_view name(b + start, name_end - start);
  Span v{value - buf_.begin(), end - value};
  if (name == "data") {
    if (!has_data_) {
      data_ = v;
    } else {
      if (!data_joined_) {
        data_scratch_.assign(view(data_));
        data_joined_ = true;
      }
      data_scratch_.push_back('\n');
      data_scratch_.append(view(v));
    }
    has_data_ = true;
  } else if (name == "event") {
    event_ = v;
  } else if (name == "id") {
    id_ = v;
  }
  // "retry" and unknown fields are ignored, as the spec says.
}

void SseParser::reset_event() {
  data_ = event_ = id_ = Span{};
  has_data_ = false;
  has_fields_ = false;
  data_joined_ = false;  // data_scratch_ is still in use by the event just handed out
}

}  // namespace llmgate::providers
