// The buffer a framer reads the upstream into (sse_parser.h,
// event_stream.h): committed bytes from begin() to end(), the frames before
// begin() handed out. prepare(n) makes room for n more bytes after end(),
// moving the unfinished frame to the front (of a bigger buffer, doubled,
// when it and n do not fit); offsets the framer keeps into the buffer move
// with it, by the amount prepare() reports. Steady state allocates nothing.
// Beast-free.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <span>

namespace llmgate::providers {

class FrameBuffer {
 public:
  // The first buffer: a streamed frame or two. It doubles when a frame or a
  // read needs more.
  static constexpr std::size_t kMinCapacity = 512;

  // At least `n` writable bytes after end(). `moved`: how far the bytes
  // from begin() on moved towards the front (an offset o into them is now
  // o - moved). Invalidates views into the buffer.
  std::span<char> prepare(std::size_t n, std::size_t& moved) {
    moved = 0;
    if (begin_ == end_) {
      moved = begin_;  // nothing buffered: start again at the front
      begin_ = end_ = 0;
    }
    if (cap_ - end_ < n) {
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
      moved += begin_;
      end_ = live;
      begin_ = 0;
    }
    return {buf_.get() + end_, cap_ - end_};
  }
  void commit(std::size_t n) { end_ += n; }
  // The frames up to `offset` were handed out.
  void consume_to(std::size_t offset) { begin_ = offset; }
  // Gives the memory back when no frame is unfinished; false (and nothing
  // done) otherwise: an unfinished one would be copied into a smaller
  // buffer that the next prepare() grows again.
  bool shrink() {
    if (end_ != begin_ || cap_ == 0) return false;
    buf_.reset();
    cap_ = begin_ = end_ = 0;
    return true;
  }

  const char* data() const { return buf_.get(); }
  std::size_t begin() const { return begin_; }
  std::size_t end() const { return end_; }
  // Drops committed bytes past `offset` (a frame over the limit is read up to it).
  void truncate_to(std::size_t offset) { end_ = offset; }
  std::size_t capacity() const { return cap_; }
  std::size_t buffered() const { return end_ - begin_; }

 private:
  std::unique_ptr<char[]> buf_;
  std::size_t cap_ = 0;
  std::size_t begin_ = 0;  // start of the unfinished frame
  std::size_t end_ = 0;    // end of the committed bytes
};

}  // namespace llmgate::providers
