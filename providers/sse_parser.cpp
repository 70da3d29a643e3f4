#include "providers/sse_parser.h"

#include <algorithm>

namespace llmgate::providers {

std::span<char> SseParser::prepare(std::size_t n) {
  if (begin_ == end_) {
    // Nothing buffered: start again at the front. Only a finished line can
    // be pending here (line_start_ == end_), and no field refers to bytes.
    begin_ = line_start_ = scan_ = end_ = 0;
  }
  if (cap_ - end_ < n) {
    // Move the unfinished event to the front, of a bigger buffer if it and
    // `n` more bytes do not fit. Field spans are relative to begin_ and stay
    // valid.
    const std::size_t live = end_ - begin_;
    if (cap_ - live < n) {
      const std::size_t cap = std::max({cap_ * 2, live + n, kMinCapacity});
      auto bigger = std::make_unique_for_overwrite<char[]>(cap);
      if (live > 0) std::memcpy(bigger.get(), buf_.get() + begin_, live);
      buf_ = std::move(bigger);
      cap_ = cap;
    } else {
      std::memmove(buf_.get(), buf_.get() + begin_, live);
    }
    line_start_ -= begin_;
    scan_ -= begin_;
    end_ = live;
    begin_ = 0;
  }
  return {buf_.get() + end_, cap_ - end_};
}

void SseParser::shrink() {
  // Only between events: an unfinished one would be copied into a smaller
  // buffer that the next prepare() grows again.
  if (end_ != begin_ || cap_ == 0) return;
  buf_.reset();
  cap_ = begin_ = line_start_ = scan_ = end_ = 0;
}

SseParser::Next SseParser::next(SseEvent& ev) {
  const char* b = buf_.get();
  while (scan_ < end_) {
    if (skip_lf_) {
      skip_lf_ = false;
      if (b[scan_] == '\n') {  // the LF of a CRLF already handled at the CR
        line_start_ = ++scan_;
        continue;
      }
    }
    // The next line end: LF, CR or CR LF.
    const char* from = b + scan_;
    std::size_t avail = end_ - scan_;
    const char* lf = static_cast<const char*>(std::memchr(from, '\n', avail));
    std::size_t upto = lf ? static_cast<std::size_t>(lf - from) : avail;
    const char* cr = static_cast<const char*>(std::memchr(from, '\r', upto));
    const char* term = cr ? cr : lf;
    if (!term) {
      scan_ = end_;  // a partial line, all of it ordinary bytes
      if (end_ - begin_ > max_event_bytes_) {
        end_ = begin_ + max_event_bytes_ + 1;  // read up to the first byte over the limit
        return Next::kTooLarge;
      }
      return Next::kNeedMore;
    }
    const std::size_t t = static_cast<std::size_t>(term - b);
    if (t > line_start_ && t - begin_ > max_event_bytes_) {
      end_ = begin_ + max_event_bytes_ + 1;
      scan_ = std::min(scan_, end_);
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
      begin_ = scan_;
      continue;
    }
    ev.raw = std::string_view(b + begin_, scan_ - begin_);
    ev.data = data_joined_ ? std::string_view(data_scratch_) : view(data_);
    ev.event = view(event_);
    ev.id = view(id_);
    ev.has_data = has_data_;
    begin_ = scan_;
    reset_event();
    return Next::kEvent;
  }
  return Next::kNeedMore;
}

void SseParser::process_field(std::size_t start, std::size_t end) {
  const char* b = buf_.get();
  if (b[start] == ':') return;  // comment
  const char* colon = static_cast<const char*>(std::memchr(b + start, ':', end - start));
  std::size_t name_end = colon ? static_cast<std::size_t>(colon - b) : end;
  std::size_t value = colon ? name_end + 1 : end;
  if (value < end && b[value] == ' ') ++value;
  std::string_view name(b + start, name_end - start);
  Span v{value - begin_, end - value};
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
