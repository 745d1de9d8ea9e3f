#pragma once
// A non-owning view of a dense row-major tensor: data pointer, dtype and shape.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace pypto {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& s);  // "[1024, 4096]"
int64_t shape_numel(const Shape& s);

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::F32;
  Shape shape;

  int64_t numel() const { return shape_numel(shape); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  int64_t dim(int i) const { return shape[i < 0 ? shape.size() + i : i]; }
  template <typename T>
  T* as() const { return static_cast<T*>(data); }
};

}  // namespace pypto
