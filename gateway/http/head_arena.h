// The memory of one client request's head: Beast's field set allocates an
// element per header field and a buffer for the request line -- ten to
// twenty allocations for an SDK's request (its x-stainless-* fields), each
// freed when the request ends. HeadAllocator takes them from one block
// instead (HeadArena: one allocation a request, sized by the requests
// before it), as the upstream's head is kept in one buffer
// (gateway/proxy/upstream_parser.h).
//
// The arena is the request's: it must outlive every field set made with
// it (serve_request declares it before the parser). A bump allocator: what
// a field set frees is reused only once all of it is freed, when the block
// goes back too (a connection idle between requests holds none). A request
// larger than the block takes the rest from the heap, and the next block is
// made larger, up to kMaxBlock (smaller again after one that used a quarter
// of it, down to kFirstBlock). A head found whole before it is parsed sizes
// the block itself (expect()): a connection's first request, an SDK's head
// of a dozen fields, is one allocation too. A copy of a field set is the heap's
// (select_on_container_copy_construction); a move keeps the arena.
// Beast-free.
#pragma once

#include <algorithm>
#include <cstddef>
#include <new>
#include <type_traits>

namespace llmgate::gateway {

class HeadArena {
 public:
  static constexpr std::size_t kFirstBlock = 512;
  static constexpr std::size_t kMaxBlock = 16 * 1024;

  HeadArena() = default;
  HeadArena(const HeadArena&) = delete;
  HeadArena& operator=(const HeadArena&) = delete;
  ~HeadArena() { ::operator delete(block_); }

  // A head of `head_bytes` (request line to blank line) is about to be
  // parsed: the next block is made large enough for its fields if it would
  // not be. Beast keeps each field's line with ~48 bytes of links beside it:
  // three times the head covers lines of 24 bytes and more (an SDK's are
  // ~35), without a pass over the head to count them (that pass cost more
  // than the allocations it saves); never past kMaxBlock. Nothing while a
  // block is held.
  static constexpr std::size_t kHeadFactor = 3;
  void expect(std::size_t head_bytes) {
    if (block_ != nullptr) return;
    size_ = std::clamp(kHeadFactor * head_bytes, size_, kMaxBlock);
  }

  // `n` bytes aligned for `align` (at most alignof(std::max_align_t)).
  void* allocate(std::size_t n, std::size_t align) {
    if (block_ == nullptr) {
      block_ = static_cast<char*>(::operator new(size_));
      used_ = 0;
    }
    const std::size_t at = (used_ + align - 1) & ~(align - 1);
    if (at <= size_ && n <= size_ - at) {
      used_ = at + n;
      ++live_;
      return block_ + at;
    }
    overflowed_ = true;
    return ::operator new(n);
  }

  void deallocate(void* p) noexcept {
    char* c = static_cast<char*>(p);
    if (block_ == nullptr || c < block_ || c >= block_ + size_) {
      ::operator delete(p);
      return;
    }
    if (--live_ > 0) return;
    // Nothing of this block is in use: it goes, and the next is larger if
    // this one was not enough, smaller if a quarter of it was.
    ::operator delete(block_);
    block_ = nullptr;
    if (overflowed_) {
      size_ = std::min(kMaxBlock, 2 * size_);
    } else if (used_ < size_ / 4) {
      size_ = std::max(kFirstBlock, size_ / 2);
    }
    overflowed_ = false;
  }

  // For tests: allocations the block holds, and its size.
  std::size_t live() const { return live_; }
  std::size_t block_size() const { return size_; }
  bool holds_block() const { return block_ != nullptr; }

 private:
  char* block_ = nullptr;
  std::size_t size_ = kFirstBlock;
  std::size_t used_ = 0;
  std::size_t live_ = 0;
  bool overflowed_ = false;
};

// A standard allocator over a HeadArena, or over the heap when it has none
// (a default-constructed one: field sets made outside a session, copies).
template <class T>
class HeadAllocator {
 public:
  using value_type = T;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_copy_assignment = std::false_type;
  using propagate_on_container_swap = std::true_type;
  using is_always_equal = std::false_type;

  HeadAllocator() noexcept = default;
  explicit HeadAllocator(HeadArena* arena) noexcept : arena_(arena) {}
  template <class U>
  HeadAllocator(const HeadAllocator<U>& other) noexcept  // NOLINT: rebinding
      : arena_(other.arena()) {}

  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= alignof(std::max_align_t));
    if (arena_ == nullptr) return static_cast<T*>(::operator new(n * sizeof(T)));
    return static_cast<T*>(arena_->allocate(n * sizeof(T), alignof(T)));
  }
  void deallocate(T* p, std::size_t) noexcept {
    if (arena_ == nullptr) {
      ::operator delete(p);
    } else {
      arena_->deallocate(p);
    }
  }
  // A copy does not share the original's arena (it may outlive it).
  HeadAllocator select_on_container_copy_construction() const { return HeadAllocator(); }

  HeadArena* arena() const { return arena_; }

  template <class U>
  bool operator==(const HeadAllocator<U>& other) const noexcept {
    return arena_ == other.arena();
  }

 private:
  HeadArena* arena_ = nullptr;
};

}  // namespace llmgate::gateway
