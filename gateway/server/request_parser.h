// The parser of a client's request: Beast's HTTP/1 parser (the grammar,
// framing, header and body limits, chunked decoding) reading into a
// ClientRequest (gateway/http/client_request.h) the caller owns, instead of
// Beast's request_parser and its field set. The body goes to the request's
// string as string_body's reader puts it; a chunked body's trailer fields
// are dropped (RFC 9110 §6.5.1: a recipient must not merge trailers into the
// header section, which the gateway checked before the body and forwards
// upstream). ChunkedBodyReader (chunked_request.h) bounds a chunked body's
// lines and trailer section.
// Includes Beast: include only from gateway sources that already do.
#pragma once

#include <boost/beast/http/basic_parser.hpp>
#include <cstdint>
#include <string_view>

#include "gateway/http/client_request.h"

namespace llmgate::gateway {

namespace beast = boost::beast;
namespace http = boost::beast::http;

class RequestParser final : public http::basic_parser<true> {
 public:
  explicit RequestParser(ClientRequest& into) : req_(into) {}
  ClientRequest& get() { return req_; }
  const ClientRequest& get() const { return req_; }

  // `f(size, extensions, ec)` is called at each chunk line, as Beast's
  // parser::on_chunk_header: a reference is kept (f must outlive the
  // parser's use).
  template <class F>
  void on_chunk_header(F& f) {
    chunk_ctx_ = &f;
    chunk_fn_ = [](void* ctx, std::uint64_t size, beast::string_view extensions,
                   beast::error_code& ec) { (*static_cast<F*>(ctx))(size, extensions, ec); };
  }

 private:
  void on_request_impl(http::verb method, beast::string_view method_string,
                       beast::string_view target, int version, beast::error_code& ec) override;
  void on_response_impl(int, beast::string_view, int, beast::error_code&) override {}
  void on_field_impl(http::field name, beast::string_view name_string, beast::string_view value,
                     beast::error_code& ec) override;
  void on_header_impl(beast::error_code& ec) override;
  void on_body_init_impl(const boost::optional<std::uint64_t>& content_length,
                         beast::error_code& ec) override;
  std::size_t on_body_impl(beast::string_view body, beast::error_code& ec) override;
  void on_chunk_header_impl(std::uint64_t size, beast::string_view extensions,
                            beast::error_code& ec) override;
  std::size_t on_chunk_body_impl(std::uint64_t remain, beast::string_view body,
                                 beast::error_code& ec) override;
  void on_finish_impl(beast::error_code& ec) override { ec = {}; }

  ClientRequest& req_;
  bool header_done_ = false;  // fields after it are a chunked body's trailers
  void* chunk_ctx_ = nullptr;
  void (*chunk_fn_)(void*, std::uint64_t, beast::string_view, beast::error_code&) = nullptr;
};

}  // namespace llmgate::gateway
