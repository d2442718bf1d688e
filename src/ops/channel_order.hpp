// Channels-first copies of channels-last tensors, for the GroupNorm calls that do not take the
// channels-last kernels (tensors stored in more than one type, small samples, the float64
// reference kernels): they run the channels-first kernels between a copy into
// (N, C, positions) order and one back into (N, positions, C).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

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
  struct Free {
    void operator()(std::byte* bytes) const;
  };
  reference::GroupLayout layout_;
  int64_t element_bytes_;
  std::unique_ptr<std::byte[], Free> bytes_;  // uninitialised: every element is written before read
};

// One call's tensors as a channels-first kernel takes them. A channels-last call with more than
// one position a sample gets channels-first copies of its inputs, and buffers for its outputs
// that finish() copies back into channels-last order; any other call gets its tensors as they
// are (with one position a sample, channels last is channels first).
class ChannelsFirstCall {
 public:
  ChannelsFirstCall(const reference::GroupLayout& layout, bool channels_last)
      : layout_(layout), permutes_(channels_last && layout.spatial > 1) {}

  const void* input(const void* tensor, int64_t element_bytes);
  void* output(void* tensor, int64_t element_bytes);
  template <class T>
  const T* input(const T* tensor) {
    return static_cast<const T*>(input(static_cast<const void*>(tensor), sizeof(T)));
  }
  template <class T>
  T* output(T* tensor) {
    return static_cast<T*>(output(static_cast<void*>(tensor), sizeof(T)));
  }
  // Copies each output back into its channels-last tensor, after the kernel has run.
  void finish() const;

 private:
  reference::GroupLayout layout_;
  bool permutes_;
  std::vector<ChannelsFirst> inputs_;
  std::vector<std::pair<ChannelsFirst, void*>> outputs_;  // a buffer and where it goes
};

}  // namespace addnorm::detail
