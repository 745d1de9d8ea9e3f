#include "engine/mtp_executor.h"

namespace pypto {

void MtpExecutor::start_capture(int64_t T) {
  hidden_.resize(static_cast<size_t>(T * model_.hidden_size()));
  model_.set_normed_hidden_out(hidden_.data());
}

}  // namespace pypto
