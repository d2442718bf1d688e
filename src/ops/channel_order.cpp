#include "ops/channel_order.hpp"

#include <algorithm>
#include <cstdlib>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace addnorm::detail {
namespace {

// Element (n, c, p) of a channels-first tensor and element (n, p, c) of a channels-last one
// trade places: to_first copies from last into first, else the other way. E: an unsigned
// integer of the elements' width, so the copy moves bits. A sample is a (positions, C) matrix
// transposed, in tiles of kTile x kTile: an element at a time along a whole row, one side's
// stores (or loads) went to a different page for every channel, 0.45 GB/s for a float64
// (8, 320, 64, 64) tensor on AMD EPYC; a tile touches kTile pages on each side.
constexpr int64_t kTile = 32;

template <class E>
void permute_as(const reference::GroupLayout& layout, const void* from_bytes, void* to_bytes,
                bool to_first) {
  const auto* from = static_cast<const E*>(from_bytes);
  auto* to = static_cast<E*>(to_bytes);
  const int64_t channels = layout.channels, spatial = layout.spatial;
  const int64_t position_tiles = (spatial + kTile - 1) / kTile;
  const int64_t channel_tiles = (channels + kTile - 1) / kTile;
  // Tiles over the threads: a copy, the same bits however they are split.
#pragma omp parallel for collapse(2) schedule(static) if (layout.elements() >= (int64_t{1} << 16))
  for (int64_t n = 0; n < layout.batch; ++n) {
    for (int64_t tile = 0; tile < position_tiles * channel_tiles; ++tile) {
      const int64_t sample = n * channels * spatial;
      const int64_t p0 = tile / channel_tiles * kTile, c0 = tile % channel_tiles * kTile;
      const int64_t p1 = std::min(p0 + kTile, spatial), c1 = std::min(c0 + kTile, channels);
      for (int64_t p = p0; p < p1; ++p) {
        for (int64_t c = c0; c < c1; ++c) {
          const int64_t last = sample + p * channels + c, first = sample + c * spatial + p;
          to[to_first ? first : last] = from[to_first ? last : first];
        }
      }
    }
  }
}

void permute(const reference::GroupLayout& layout, int64_t bytes, const void* from, void* to,
             bool to_first) {
  switch (bytes) {
    case 2:
      return permute_as<uint16_t>(layout, from, to, to_first);
    case 4:
      return permute_as<uint32_t>(layout, from, to, to_first);
    default:
      return permute_as<uint64_t>(layout, from, to, to_first);
  }
}

// A copy's buffer. A fresh one of tens of MiB page-faults on every 4 KiB page as the copy first
// writes it, and in a VM each fault is dear: 170 ms of the 180 ms that copying a float64
// (8, 320, 64, 64) tensor in took on AMD EPYC. Large buffers are aligned to 2 MiB and asked for
// transparent huge pages, so that they fault once a 2 MiB page (where the kernel allows it).
constexpr size_t kHugePage = size_t{2} << 20;

std::byte* allocate(size_t bytes) {
  if (bytes < 2 * kHugePage)
    return static_cast<std::byte*>(std::malloc(std::max<size_t>(bytes, 1)));
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  auto* buffer = static_cast<std::byte*>(std::aligned_alloc(kHugePage, rounded));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (buffer) madvise(buffer, rounded, MADV_HUGEPAGE);  // advice: a refusal changes nothing
#endif
  return buffer;
}

}  // namespace

void ChannelsFirst::Free::operator()(std::byte* bytes) const {
  std::free(bytes);
}

ChannelsFirst::ChannelsFirst(const reference::GroupLayout& layout, int64_t element_bytes)
    : layout_(layout),
      element_bytes_(element_bytes),
      bytes_(allocate(static_cast<size_t>(layout.elements() * element_bytes))) {
  if (!bytes_) throw std::bad_alloc();
}

ChannelsFirst::ChannelsFirst(const reference::GroupLayout& layout, int64_t element_bytes,
                             const void* channels_last)
    : ChannelsFirst(layout, element_bytes) {
  permute(layout_, element_bytes_, channels_last, bytes_.get(), true);
}

void ChannelsFirst::copy_to(void* channels_last) const {
  permute(layout_, element_bytes_, bytes_.get(), channels_last, false);
}

}  // namespace addnorm::detail

namespace addnorm::detail {

const void* ChannelsFirstCall::input(const void* tensor, int64_t element_bytes) {
  if (!permutes_) return tensor;
  return inputs_.emplace_back(layout_, element_bytes, tensor).data();
}

void* ChannelsFirstCall::output(void* tensor, int64_t element_bytes) {
  if (!permutes_) return tensor;
  return outputs_.emplace_back(ChannelsFirst(layout_, element_bytes), tensor).first.data();
}

void ChannelsFirstCall::finish() const {
  for (const auto& [buffer, tensor] : outputs_) buffer.copy_to(tensor);
}

}  // namespace addnorm::detail
