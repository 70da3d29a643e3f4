#include "gateway/http/client_request.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "config/ascii.h"

namespace llmgate::gateway {
namespace {

constexpr std::size_t kEntry = 16;  // sizeof(Entry), checked below
constexpr std::size_t kFirstBlock = 256;

std::size_t round_up(std::size_t n) { return (n + kEntry - 1) / kEntry * kEntry; }

}  // namespace

ClientRequest::ClientRequest(http::verb method, std::string_view target, unsigned version) {
  start(method, {}, target, version);
}

ClientRequest::ClientRequest(const ClientRequest& other)
    : cap_(other.cap_),
      used_(other.used_),
      fields_(other.fields_),
      target_at_(other.target_at_),
      target_size_(other.target_size_),
      method_at_(other.method_at_),
      method_size_(other.method_size_),
      method_(other.method_),
      version_(other.version_),
      body_(other.body_) {
  if (cap_ == 0) return;
  block_ = std::make_unique_for_overwrite<char[]>(cap_);
  std::memcpy(block_.get(), other.block_.get(), used_);
  const std::size_t index = fields_ * kEntry;
  std::memcpy(block_.get() + cap_ - index, other.block_.get() + cap_ - index, index);
}

ClientRequest& ClientRequest::operator=(const ClientRequest& other) {
  if (this != &other) *this = ClientRequest(other);
  return *this;
}

ClientRequest& ClientRequest::operator=(ClientRequest&& other) noexcept {
  if (this == &other) return *this;
  block_ = std::move(other.block_);
  cap_ = std::exchange(other.cap_, 0);
  used_ = std::exchange(other.used_, 0);
  fields_ = std::exchange(other.fields_, 0);
  target_at_ = std::exchange(other.target_at_, 0);
  target_size_ = std::exchange(other.target_size_, 0);
  method_at_ = std::exchange(other.method_at_, 0);
  method_size_ = std::exchange(other.method_size_, 0);
  method_ = std::exchange(other.method_, http::verb::unknown);
  version_ = std::exchange(other.version_, 11);
  body_ = std::move(other.body_);
  other.body_.clear();
  return *this;
}

std::string_view ClientRequest::method_string() const {
  if (method_ != http::verb::unknown) {
    const auto s = http::to_string(method_);
    return {s.data(), s.size()};
  }
  return text(method_at_, method_size_);
}

ClientRequest::const_iterator ClientRequest::find(std::string_view name) const {
  std::size_t i = 0;
  for (; i < fields_; ++i) {
    const Entry e = entry(i);
    if (config::ascii_iequals(text(e.at, e.name_size), name)) break;
  }
  return {this, i};
}

std::size_t ClientRequest::count(http::field name) const {
  if (name == http::field::unknown) return 0;
  std::size_t n = 0;
  for (std::size_t i = 0; i < fields_; ++i) n += entry(i).name == name;
  return n;
}

std::size_t ClientRequest::count(std::string_view name) const {
  std::size_t n = 0;
  for (std::size_t i = 0; i < fields_; ++i) {
    const Entry e = entry(i);
    n += config::ascii_iequals(text(e.at, e.name_size), name);
  }
  return n;
}

std::string_view ClientRequest::operator[](std::string_view name) const {
  const auto it = find(name);
  return it == end() ? std::string_view() : (*it).value();
}

void ClientRequest::start(http::verb method, std::string_view method_string,
                          std::string_view target, unsigned version) {
  method_ = method;
  version_ = version;
  if (method == http::verb::unknown) {
    method_at_ = append_text(method_string);
    method_size_ = static_cast<std::uint32_t>(method_string.size());
  }
  target_at_ = append_text(target);
  target_size_ = static_cast<std::uint32_t>(target.size());
}

void ClientRequest::insert(http::field name, std::string_view name_string, std::string_view value) {
  static_assert(sizeof(Entry) == kEntry && std::is_trivially_copyable_v<Entry>);
  const std::size_t n = name_string.size() + value.size();
  if (used_ + n + (fields_ + 1) * kEntry > cap_) make_room(n, 1);
  char* at = block_.get() + used_;
  if (!name_string.empty()) std::memcpy(at, name_string.data(), name_string.size());
  if (!value.empty()) std::memcpy(at + name_string.size(), value.data(), value.size());
  const Entry e{used_, static_cast<std::uint32_t>(name_string.size()),
                static_cast<std::uint32_t>(value.size()), name};
  used_ += static_cast<std::uint32_t>(n);
  ++fields_;
  std::memcpy(block_.get() + cap_ - fields_ * kEntry, &e, kEntry);
}

void ClientRequest::insert(std::string_view name, std::string_view value) {
  insert(http::string_to_field({name.data(), name.size()}), name, value);
}

bool ClientRequest::has_room(std::size_t text, std::size_t entries) const {
  return text <= kMaxBytes && entries <= kMaxBytes / kEntry &&
         used_ + text + (fields_ + entries) * kEntry <= kMaxBytes;
}

void ClientRequest::reserve(std::size_t head_bytes) {
  if (block_ == nullptr) make_room(std::min(2 * head_bytes, std::size_t{kMaxBytes}), 0);
}

void ClientRequest::make_room(std::size_t text, std::size_t entries) {
  // Offsets are 32 bits: past that, nothing is added (RequestParser asks
  // has_room() first and refuses the head as too large).
  if (!has_room(text, entries)) throw std::length_error("a request head over 4 GiB");
  const std::size_t need = used_ + text + (fields_ + entries) * kEntry;
  if (need <= cap_) return;
  const std::size_t cap = std::min(round_up(std::max({need, 2 * std::size_t{cap_}, kFirstBlock})),
                                   std::size_t{kMaxBytes});
  auto block = std::make_unique_for_overwrite<char[]>(cap);
  if (cap_ != 0) {
    std::memcpy(block.get(), block_.get(), used_);
    const std::size_t index = fields_ * kEntry;
    std::memcpy(block.get() + cap - index, block_.get() + cap_ - index, index);
  }
  block_ = std::move(block);
  cap_ = static_cast<std::uint32_t>(cap);
}

std::uint32_t ClientRequest::append_text(std::string_view s) {
  make_room(s.size(), 0);
  const std::uint32_t at = used_;
  if (!s.empty()) std::memcpy(block_.get() + used_, s.data(), s.size());
  used_ += static_cast<std::uint32_t>(s.size());
  return at;
}

}  // namespace llmgate::gateway
