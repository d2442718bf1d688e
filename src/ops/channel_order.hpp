// Channels-first copies of channels-last tensors, for the GroupNorm calls that have no
// channels-last kernel of their own (the backward; a forward whose y is stored in another type
// than x; the float64 reference kernels): they run the channels-first kernels between a copy
// into (N, C, positions) order and one back into (N, positions, C).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "ops/reference/group_norm.hpp"

namespace addnorm::detail {

// A tensor of `layout` with elements of `element_bytes`, held in channels-first order.
class ChannelsFirst {
 public:
  ChannelsFirst(const reference::GroupLayout& layout, int64_t element_bytes);
  // `channels_last`'s elements copied in.
  ChannelsFirst(const reference::GroupLayout& layout, int64_t element_bytes,
                const void* channels_last);
  void* data() { return bytes_.get(); }
  const void* data() const { return bytes_.get(); }
  // The elements copied out, into channels-last order.
  void copy_to(void* channels_last) const;

 private:
  reference::GroupLayout layout_;
  int64_t element_bytes_;
  std::unique_ptr<std::byte[]> bytes_;  // uninitialised: every element is written before read
};

}  // namespace addnorm::detail
