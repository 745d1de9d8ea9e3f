#include "engine/request.h"

namespace pypto {

Request::Request(std::string id, std::vector<int32_t> prompt, SamplingParams params,
                 std::vector<int32_t> eos, uint64_t seed_)
    : request_id(std::move(id)),
      prompt_token_ids(std::move(prompt)),
      all_token_ids(prompt_token_ids),
      sampling_params(std::move(params)),
      eos_token_ids(std::move(eos)),
      seed(seed_) {}

void Request::append_output_token(int32_t token) {
  output_token_ids.push_back(token);
  all_token_ids.push_back(token);
}

bool is_finished(RequestStatus s) { return finish_reason(s).has_value(); }

std::optional<FinishReason> finish_reason(RequestStatus s) {
  switch (s) {
    case RequestStatus::FinishedStopped: return FinishReason::Stop;
    case RequestStatus::FinishedLength: return FinishReason::Length;
    case RequestStatus::FinishedAborted: return FinishReason::Abort;
    case RequestStatus::FinishedError: return FinishReason::Error;
    default: return std::nullopt;
  }
}

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Abort: return "abort";
    case FinishReason::Error: return "error";
  }
  return "?";
}

const char* request_status_name(RequestStatus s) {
  switch (s) {
    case RequestStatus::Waiting: return "waiting";
    case RequestStatus::Running: return "running";
    case RequestStatus::Preempted: return "preempted";
    case RequestStatus::FinishedStopped: return "finished_stopped";
    case RequestStatus::FinishedLength: return "finished_length";
    case RequestStatus::FinishedAborted: return "finished_aborted";
    case RequestStatus::FinishedError: return "finished_error";
  }
  return "?";
}

}  // namespace pypto
