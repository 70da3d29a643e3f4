#include "gateway/proxy/upstream_parser.h"

#include <algorithm>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <cstring>

namespace llmgate::gateway {

namespace beast = boost::beast;

bool relayed_upstream_field(http::field name, std::string_view name_string, bool with_retry_after) {
  constexpr std::string_view kRateLimit = "x-ratelimit-";
  return (name_string.size() > kRateLimit.size() &&
          beast::iequals(name_string.substr(0, kRateLimit.size()), kRateLimit)) ||
         beast::iequals(name_string, "openai-processing-ms") ||
         (with_retry_after && name == http::field::retry_after);
}

bool kept_upstream_field(http::field name, std::string_view name_string) {
  return name == http::field::content_type ||
         relayed_upstream_field(name, name_string, /*with_retry_after=*/true);
}

void UpstreamHead::keep(http::field name, std::string_view name_string, std::string_view value) {
  const auto at = static_cast<std::uint32_t>(text_.size());
  text_.insert(text_.end(), name_string.begin(), name_string.end());
  text_.insert(text_.end(), value.begin(), value.end());
  fields_.push_back(Entry{name, at, static_cast<std::uint32_t>(name_string.size()),
                          static_cast<std::uint32_t>(at + name_string.size()),
                          static_cast<std::uint32_t>(value.size())});
}

std::string_view UpstreamHead::operator[](http::field name) const {
  if (name == http::field::unknown) return {};  // a name, not a field of Beast's table
  for (std::size_t i = 0; i < fields_.size(); ++i) {
    if (fields_[i].name == name) return (*this)[i].value;
  }
  return {};
}

UpstreamHead::Field UpstreamHead::operator[](std::size_t i) const {
  const Entry& e = fields_[i];
  return Field{e.name, std::string_view(text_.data() + e.name_at, e.name_size),
               std::string_view(text_.data() + e.value_at, e.value_size)};
}

void UpstreamParser::on_response_impl(int code, beast::string_view, int, beast::error_code& ec) {
  head_.status_ = static_cast<unsigned>(code);
  ec = {};
}

void UpstreamParser::on_field_impl(http::field name, beast::string_view name_string,
                                   beast::string_view value, beast::error_code& ec) {
  const std::string_view n(name_string.data(), name_string.size());
  if (kept_upstream_field(name, n))
    head_.keep(name, n, std::string_view(value.data(), value.size()));
  ec = {};
}

void UpstreamParser::on_body_init_impl(const boost::optional<std::uint64_t>&,
                                       beast::error_code& ec) {
  ec = {};
}

std::size_t UpstreamParser::on_body_impl(beast::string_view body, beast::error_code& ec) {
  return put_body(body, ec);
}

void UpstreamParser::on_chunk_header_impl(std::uint64_t, beast::string_view,
                                          beast::error_code& ec) {
  ec = {};
}

std::size_t UpstreamParser::on_chunk_body_impl(std::uint64_t, beast::string_view body,
                                               beast::error_code& ec) {
  return put_body(body, ec);
}

// As http::buffer_body's reader: as much as the buffer takes, and need_buffer
// when it takes less than all (or there is no buffer).
std::size_t UpstreamParser::put_body(beast::string_view body, beast::error_code& ec) {
  auto& b = head_.body_;
  if (b.data == nullptr) {
    ec = http::error::need_buffer;
    return 0;
  }
  const std::size_t n = std::min(b.size, body.size());
  if (n > 0) std::memcpy(b.data, body.data(), n);
  b.data = static_cast<char*>(b.data) + n;
  b.size -= n;
  if (n == body.size()) {
    ec = {};
  } else {
    ec = http::error::need_buffer;
  }
  return n;
}

}  // namespace llmgate::gateway
