#include "ops/channel_order.hpp"

namespace addnorm::detail {
namespace {

// Element (n, c, p) of a channels-first tensor and element (n, p, c) of a channels-last one
// trade places: to_first copies from last into first, else the other way. E: an unsigned
// integer of the elements' width, so the copy moves bits.
template <class E>
void permute_as(const reference::GroupLayout& layout, const void* from_bytes, void* to_bytes,
                bool to_first) {
  const auto* from = static_cast<const E*>(from_bytes);
  auto* to = static_cast<E*>(to_bytes);
  const int64_t channels = layout.channels, spatial = layout.spatial;
  // Samples over the threads: a copy, the same bits however they are split.
#pragma omp parallel for schedule(static) if (layout.elements() >= (int64_t{1} << 16))
  for (int64_t n = 0; n < layout.batch; ++n) {
    const int64_t sample = n * channels * spatial;
    for (int64_t p = 0; p < spatial; ++p) {
      for (int64_t c = 0; c < channels; ++c) {
        const int64_t last = sample + p * channels + c, first = sample + c * spatial + p;
        to[to_first ? first : last] = from[to_first ? last : first];
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

}  // namespace

ChannelsFirst::ChannelsFirst(const reference::GroupLayout& layout, int64_t element_bytes)
    : layout_(layout),
      element_bytes_(element_bytes),
      bytes_(new std::byte[static_cast<size_t>(layout.elements() * element_bytes)]) {}

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
