// Bytes for the client, in order: views into the SSE parser's buffer (valid
// until its next prepare()) and pieces of a scratch string (events held
// across reads before the commit, or rewritten). Adjacent views are merged,
// so an unchanged run of events is one piece. Steady state allocates
// nothing: the segments and pieces live inline up to kInline, the scratch
// string is reused. Beast-free: the
// client stream turns pieces() into buffers for one gathered write.
#pragma once

#include <boost/container/small_vector.hpp>
#include <span>
#include <string>
#include <string_view>

namespace llmgate::gateway {

class Outbox {
 public:
  bool empty() const { return segs_.empty(); }
  // Bytes that stay valid until the next hold() (the parser's buffer).
  void view(std::string_view v) {
    if (v.empty()) return;
    if (!segs_.empty() && segs_.back().ptr && segs_.back().ptr + segs_.back().len == v.data()) {
      segs_.back().len += v.size();
      return;
    }
    push({v.data(), 0, v.size()});
  }
  // Bytes copied now (rewritten or generated).
  void copy(std::string_view v) {
    if (v.empty()) return;
    if (!segs_.empty() && !segs_.back().ptr &&
        segs_.back().off + segs_.back().len == scratch_.size()) {
      segs_.back().len += v.size();
    } else {
      push({nullptr, scratch_.size(), v.size()});
    }
    scratch_.append(v);
  }
  // Copies the views into scratch (before the parser's buffer is reused).
  void hold() {
    bool any = false;
    for (auto& s : segs_) any = any || s.ptr;
    if (!any) return;
    const Segs held(segs_.begin(), segs_.end());
    segs_.clear();
    for (auto& s : held) {
      if (s.ptr)
        copy({s.ptr, s.len});
      else
        segs_.push_back(s);
    }
  }
  // Room in the scratch string for `n` more copied bytes (one allocation
  // for an event copied in pieces).
  void reserve(std::size_t n) { scratch_.reserve(scratch_.size() + n); }
  // The bytes, in order; valid until the next change.
  std::span<const std::string_view> pieces() {
    pieces_.clear();
    for (auto& s : segs_) pieces_.emplace_back(s.ptr ? s.ptr : scratch_.data() + s.off, s.len);
    return {pieces_.data(), pieces_.size()};
  }
  std::string str() {
    std::string out;
    for (auto p : pieces()) out.append(p);
    return out;
  }
  void clear() {
    segs_.clear();
    scratch_.clear();
  }
  // Between writes of a quiet stream: gives back the scratch string (what
  // was held before the commit, a few hundred bytes an open stream need not
  // keep); what a later event needs, it takes again.
  void shrink() {
    if (!segs_.empty()) return;
    std::string().swap(scratch_);
  }

 private:
  struct Seg {
    const char* ptr;  // a view, or null for scratch_[off, off + len)
    std::size_t off, len;
  };
  // A request's usual write is a few pieces: the head, an event or a run of
  // them, a rewritten one.
  static constexpr std::size_t kInline = 8;
  using Segs = boost::container::small_vector<Seg, kInline>;
  void push(Seg s) { segs_.push_back(s); }
  Segs segs_;
  std::string scratch_;
  boost::container::small_vector<std::string_view, kInline> pieces_;
};

}  // namespace llmgate::gateway
