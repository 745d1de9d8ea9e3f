// make_cpu_backend: placeholder that serves the reference ops until the optimised backend lands.
#include "kernels/backend.h"

namespace pypto {
std::unique_ptr<Backend> make_cpu_backend(int num_threads, const std::vector<int>& cores) {
  return make_reference_backend();
}
}  // namespace pypto
