// A client's request as the gateway keeps it: the request line, the head's
// fields in arrival order, and the body. gateway/server/request_parser.h
// reads one with Beast's HTTP/1 parser (framing, limits, the grammar) into
// one block per request -- names and values from the block's front, an
// index of them from its back -- instead of Beast's field set (an element
// and an ordered-tree insertion per field, ~5,000 instructions for an SDK's
// fifteen: bench/README.md, Transport II hot path 4). The upstream's head is
// kept the same way (gateway/proxy/upstream_parser.h).
//
// Lookups are linear: a head has one or two dozen fields, and a lookup of a
// field Beast knows compares its enum, one of any other name its length
// first. Names compare without case; a name's values keep their order.
// Beast-light: Beast's field and verb enums only.
#pragma once

#include <boost/beast/http/field.hpp>
#include <boost/beast/http/verb.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace llmgate::gateway {

namespace http = boost::beast::http;

class ClientRequest {
  struct Entry {
    std::uint32_t at, name_size, value_size;  // the name at `at`, its value right after it
    http::field name;
  };

 public:
  // One field: views into the request (valid while it lives and gets no
  // new field).
  class Field {
   public:
    http::field name() const { return name_; }  // field::unknown for a name Beast has no enum for
    std::string_view name_string() const { return name_string_; }
    std::string_view value() const { return value_; }

   private:
    friend class ClientRequest;
    Field(http::field name, std::string_view name_string, std::string_view value)
        : name_(name), name_string_(name_string), value_(value) {}
    http::field name_;
    std::string_view name_string_, value_;
  };

  // The fields in arrival order (a field by value: *it, it->value()).
  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = Field;
    using difference_type = std::ptrdiff_t;
    using reference = Field;
    struct pointer {
      Field f;
      const Field* operator->() const { return &f; }
    };

    const_iterator() = default;
    Field operator*() const { return r_->field(i_); }
    pointer operator->() const { return pointer{**this}; }
    const_iterator& operator++() {
      ++i_;
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator before = *this;
      ++i_;
      return before;
    }
    bool operator==(const const_iterator& o) const { return i_ == o.i_; }

   private:
    friend class ClientRequest;
    const_iterator(const ClientRequest* r, std::size_t i) : r_(r), i_(i) {}
    const ClientRequest* r_ = nullptr;
    std::size_t i_ = 0;
  };

  ClientRequest() = default;
  // A request made outside a session (tests, tools).
  ClientRequest(http::verb method, std::string_view target, unsigned version);
  ClientRequest(const ClientRequest& other);
  ClientRequest& operator=(const ClientRequest& other);
  ClientRequest(ClientRequest&& other) noexcept { *this = std::move(other); }
  ClientRequest& operator=(ClientRequest&& other) noexcept;  // `other` left empty
  ~ClientRequest() = default;

  // The request line. method_string() is the method as sent for one Beast
  // has no verb for (http::verb::unknown).
  http::verb method() const { return method_; }
  std::string_view method_string() const;
  std::string_view target() const { return text(target_at_, target_size_); }
  unsigned version() const { return version_; }  // 11 for HTTP/1.1, 10 for HTTP/1.0

  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, fields_}; }
  std::size_t size() const { return fields_; }

  // The first field of a name (end() if none), how many there are, and the
  // first one's value ("" if none).
  const_iterator find(http::field name) const {
    if (name == http::field::unknown) return end();  // a name, not one of Beast's enums
    std::size_t i = 0;
    while (i < fields_ && entry(i).name != name) ++i;
    return {this, i};
  }
  const_iterator find(std::string_view name) const;
  std::size_t count(http::field name) const;
  std::size_t count(std::string_view name) const;
  std::string_view operator[](http::field name) const {
    const auto it = find(name);
    return it == end() ? std::string_view() : (*it).value();
  }
  std::string_view operator[](std::string_view name) const;

  std::string& body() { return body_; }
  const std::string& body() const { return body_; }

  // What the parser (and a test) builds a request with.
  void start(http::verb method, std::string_view method_string, std::string_view target,
             unsigned version);
  void insert(http::field name, std::string_view name_string, std::string_view value);
  void insert(std::string_view name, std::string_view value);  // the enum looked up
  // A head of `head_bytes` (request line to blank line) is about to be
  // read: one block for all of it, twice its length -- its text is shorter
  // than the head and the index takes 16 bytes a field, so that covers lines
  // of 16 bytes and more (an SDK's are ~35; a head of tinier ones grows the
  // block as it is read). Nothing if the request holds a block already.
  void reserve(std::size_t head_bytes);
  // Whether `text` more bytes and `entries` more fields fit in the 4 GiB a
  // request's offsets can address (a head that large needs
  // server.limits.max_header_size near its 1 GiB maximum and tiny lines).
  // insert() and start() past it throw std::length_error.
  static constexpr std::uint32_t kMaxBytes = 0xFFFFFFF0u;
  bool has_room(std::size_t text, std::size_t entries) const;
  std::size_t block_size() const { return cap_; }  // for tests

 private:
  std::string_view text(std::uint32_t at, std::uint32_t size) const {
    return {block_.get() + at, size};
  }
  // The i-th field's index entry (the block's last is the first field's).
  Entry entry(std::size_t i) const {
    Entry e;
    std::memcpy(&e, block_.get() + cap_ - (i + 1) * sizeof(Entry), sizeof(Entry));
    return e;
  }
  Field field(std::size_t i) const {
    const Entry e = entry(i);
    return Field(e.name, text(e.at, e.name_size), text(e.at + e.name_size, e.value_size));
  }
  // Room for `text` more bytes and `entries` more fields, the block grown
  // if there is not.
  void make_room(std::size_t text, std::size_t entries);
  std::uint32_t append_text(std::string_view s);

  std::unique_ptr<char[]> block_;
  std::uint32_t cap_ = 0;     // the block's bytes (a multiple of sizeof(Entry))
  std::uint32_t used_ = 0;    // text bytes from the front
  std::uint32_t fields_ = 0;  // entries from the back, the first field last
  std::uint32_t target_at_ = 0, target_size_ = 0, method_at_ = 0, method_size_ = 0;
  http::verb method_ = http::verb::unknown;
  unsigned version_ = 11;
  std::string body_;
};

}  // namespace llmgate::gateway
