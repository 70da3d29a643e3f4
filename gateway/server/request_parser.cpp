#include "gateway/server/request_parser.h"

#include <boost/beast/http/error.hpp>

namespace llmgate::gateway {
namespace {

std::string_view view(beast::string_view s) { return {s.data(), s.size()}; }

}  // namespace

void RequestParser::on_request_impl(http::verb method, beast::string_view method_string,
                                    beast::string_view target, int version, beast::error_code& ec) {
  if (!req_.has_room(method_string.size() + target.size(), 0)) {
    ec = http::error::header_limit;
    return;
  }
  req_.start(method, view(method_string), view(target), static_cast<unsigned>(version));
  ec = {};
}

void RequestParser::on_field_impl(http::field name, beast::string_view name_string,
                                  beast::string_view value, beast::error_code& ec) {
  ec = {};
  if (header_done_) return;  // a trailer field: dropped
  if (!req_.has_room(name_string.size() + value.size(), 1)) {
    ec = http::error::header_limit;  // past what the request's offsets address: 431
    return;
  }
  req_.insert(name, view(name_string), view(value));
}

void RequestParser::on_header_impl(beast::error_code& ec) {
  header_done_ = true;
  ec = {};
}

void RequestParser::on_body_init_impl(const boost::optional<std::uint64_t>& content_length,
                                      beast::error_code& ec) {
  // The header limit and body_limit() were checked by Beast before this.
  if (content_length) {
    if (*content_length > req_.body().max_size()) {
      ec = http::error::buffer_overflow;
      return;
    }
    req_.body().reserve(static_cast<std::size_t>(*content_length));
  }
  ec = {};
}

std::size_t RequestParser::on_body_impl(beast::string_view body, beast::error_code& ec) {
  req_.body().append(body.data(), body.size());
  ec = {};
  return body.size();
}

void RequestParser::on_chunk_header_impl(std::uint64_t size, beast::string_view extensions,
                                         beast::error_code& ec) {
  ec = {};
  if (chunk_fn_ != nullptr) chunk_fn_(chunk_ctx_, size, extensions, ec);
}

std::size_t RequestParser::on_chunk_body_impl(std::uint64_t, beast::string_view body,
                                              beast::error_code& ec) {
  return on_body_impl(body, ec);
}

}  // namespace llmgate::gateway
