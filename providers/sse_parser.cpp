#include "providers/sse_parser.h"

namespace llmgate::providers {

bool SseParser::end_line() {
  if (line_.empty()) {
    // A blank line dispatches the event. Blank lines with nothing before them
    // (stray separators) are dropped rather than reported as empty events.
    if (!has_fields_) {
      raw_.clear();
      return false;
    }
    return true;
  }
  has_fields_ = true;
  process_field(line_);
  line_.clear();
  return false;
}

void SseParser::process_field(std::string_view line) {
  if (line.front() == ':') return;  // comment
  std::string_view name = line;
  std::string_view value;
  if (auto colon = line.find(':'); colon != std::string_view::npos) {
    name = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (name == "data") {
    if (has_data_) data_.push_back('\n');
    data_.append(value);
    has_data_ = true;
  } else if (name == "event") {
    event_.assign(value);
  } else if (name == "id") {
    id_.assign(value);
  }
  // "retry" and unknown fields are ignored, as the spec says.
}

SseEvent SseParser::current() const {
  return SseEvent{raw_, data_, event_, id_, has_data_};
}

void SseParser::reset_event() {
  raw_.clear();
  line_.clear();
  data_.clear();
  event_.clear();
  id_.clear();
  has_data_ = false;
  has_fields_ = false;
}

bool SseParser::only_blank_lines() const {
  return !has_fields_ && line_.empty();
}

}  // namespace llmgate::providers
