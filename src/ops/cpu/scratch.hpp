// Per-thread scratch memory for a call's per-channel tables and partial sums, so that a call
// allocates nothing once the calling thread has seen a call of its size: memory comes from blocks
// that are kept between calls and never move. A Scratch object marks the calling thread's
// position; take() hands out pieces after it, and the destructor gives them all back. Objects
// nest in stack order (an op's Scratch, then a kernel's inside it).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

namespace addnorm::cpu {

class Scratch {
 public:
  Scratch() : arena_(arena()), block_(arena_.block), offset_(arena_.offset) {}
  ~Scratch() {
    arena_.block = block_;
    arena_.offset = offset_;
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  // `count` uninitialised values of T, 64-byte aligned, valid until this object is destroyed.
  template <class T>
  T* take(int64_t count) {
    static_assert(std::is_trivially_copyable_v<T>, "scratch holds plain values");
    return static_cast<T*>(
        arena_.take(static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(T)));
  }
  // N tables of `count` values each, for a call's per-channel tables taken side by side:
  //   const auto [mean, rstd] = scratch.take_each<double, 2>(channels);
  template <class T, size_t N>
  std::array<T*, N> take_each(int64_t count) {
    std::array<T*, N> tables;
    for (T*& table : tables) table = take<T>(count);
    return tables;
  }
  // The same as take, set to zero.
  template <class T>
  T* zeroed(int64_t count) {
    T* values = take<T>(count);
    std::memset(values, 0, static_cast<size_t>(std::max<int64_t>(count, 0)) * sizeof(T));
    return values;
  }

 private:
  static constexpr size_t kAlignment = 64;
  static constexpr size_t kMinBlockBytes = size_t{64} << 10;

  struct Block {
    struct Free {
      void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{kAlignment}); }
    };
    std::unique_ptr<std::byte[], Free> bytes;
    size_t size = 0;
  };

  // The blocks of one thread, in order; pieces are taken from block `block` at `offset`, moving
  // on to the next block (or a new one at the end) when a piece does not fit.
  struct Arena {
    std::vector<Block> blocks;
    size_t block = 0;
    size_t offset = 0;

    void* take(size_t bytes) {
      bytes = (bytes + kAlignment - 1) / kAlignment * kAlignment;
      while (block < blocks.size() && offset + bytes > blocks[block].size) {
        ++block;
        offset = 0;
      }
      if (block == blocks.size()) {
        const size_t last = blocks.empty() ? 0 : blocks.back().size;
        const size_t size = std::max({bytes, 2 * last, kMinBlockBytes});
        auto* raw = static_cast<std::byte*>(::operator new[](size, std::align_val_t{kAlignment}));
        blocks.push_back({std::unique_ptr<std::byte[], Block::Free>(raw), size});
      }
      void* piece = blocks[block].bytes.get() + offset;
      offset += bytes;
      return piece;
    }
  };

  static Arena& arena() {
    thread_local Arena instance;
    return instance;
  }

  Arena& arena_;
  size_t block_, offset_;
};

}  // namespace addnorm::cpu
