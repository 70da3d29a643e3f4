// The parser of an upstream's response (upstream_parser.cpp): Beast's HTTP/1
// parser (framing, limits, keep-alive, chunked decoding), the body into the
// caller's buffer as http::buffer_body would, and of the head only what the
// gateway reads or relays -- the status, Content-Type, Retry-After,
// x-ratelimit-* and openai-processing-ms -- copied into one small buffer
// instead of a Beast field set (an allocation and a tree insertion per field,
// held for as long as the stream lasts).
// Includes Beast: include only from gateway sources that already do.
#pragma once

#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/container/small_vector.hpp>
#include <cstdint>
#include <string_view>

namespace llmgate::gateway {

namespace http = boost::beast::http;

// Whether the gateway keeps an upstream response field (UpstreamHead): one
// it reads (Content-Type, Retry-After) or relays (relay_upstream_headers).
bool kept_upstream_field(http::field name, std::string_view name_string);

// Whether relay_upstream_headers copies an upstream field to the client:
// x-ratelimit-*, openai-processing-ms, and Retry-After when asked.
bool relayed_upstream_field(http::field name, std::string_view name_string, bool with_retry_after);

// An upstream response's head as the gateway keeps it, and its body buffer.
class UpstreamHead {
 public:
  struct Field {
    http::field name;
    std::string_view name_string, value;
  };

  unsigned result_int() const { return status_; }
  http::status result() const { return static_cast<http::status>(status_); }
  // The first value of a kept field (Content-Type, Retry-After), "" if none.
  // Views into the head: valid until the parser is next given bytes (a
  // chunked body's trailer fields are kept too, and may move the buffer).
  std::string_view operator[](http::field name) const;
  std::size_t size() const { return fields_.size(); }
  Field operator[](std::size_t i) const;  // the kept fields in arrival order (views: as above)
  // Where the parser puts body bytes, as http::buffer_body's value: `data`
  // advances and `size` shrinks by what was put.
  http::buffer_body::value_type& body() { return body_; }

 private:
  friend class UpstreamParser;
  void keep(http::field name, std::string_view name_string, std::string_view value);

  struct Entry {
    http::field name;
    std::uint32_t name_at, name_size, value_at, value_size;
  };
  boost::container::small_vector<char, 96> text_;  // the kept names and values
  boost::container::small_vector<Entry, 2> fields_;
  unsigned status_ = 0;
  http::buffer_body::value_type body_;
};

class UpstreamParser final : public http::basic_parser<false> {
 public:
  // No body limit (Beast's default for a response is 8 MB): the gateway
  // bounds a JSON answer or each event itself.
  UpstreamParser() { body_limit(boost::none); }
  UpstreamHead& get() { return head_; }
  const UpstreamHead& get() const { return head_; }

 private:
  void on_request_impl(http::verb, boost::beast::string_view, boost::beast::string_view, int,
                       boost::beast::error_code&) override {}
  void on_response_impl(int code, boost::beast::string_view reason, int version,
                        boost::beast::error_code& ec) override;
  void on_field_impl(http::field name, boost::beast::string_view name_string,
                     boost::beast::string_view value, boost::beast::error_code& ec) override;
  void on_header_impl(boost::beast::error_code& ec) override { ec = {}; }
  void on_body_init_impl(const boost::optional<std::uint64_t>& content_length,
                         boost::beast::error_code& ec) override;
  std::size_t on_body_impl(boost::beast::string_view body, boost::beast::error_code& ec) override;
  void on_chunk_header_impl(std::uint64_t size, boost::beast::string_view extensions,
                            boost::beast::error_code& ec) override;
  std::size_t on_chunk_body_impl(std::uint64_t remain, boost::beast::string_view body,
                                 boost::beast::error_code& ec) override;
  void on_finish_impl(boost::beast::error_code& ec) override { ec = {}; }

  std::size_t put_body(boost::beast::string_view body, boost::beast::error_code& ec);

  UpstreamHead head_;
};

}  // namespace llmgate::gateway
