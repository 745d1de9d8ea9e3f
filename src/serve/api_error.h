#pragma once
// An error answered to an HTTP client as OpenAI's error object:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
// Thrown anywhere in request handling before the first byte of the response is written.
#include <optional>
#include <stdexcept>
#include <string>

namespace pypto {

struct ApiError : std::runtime_error {
  ApiError(int status, std::string message, std::string type, std::optional<std::string> param = std::nullopt,
           std::optional<std::string> code = std::nullopt)
      : std::runtime_error(message), status(status), type(std::move(type)), param(std::move(param)),
        code(std::move(code)) {}

  int status;                        // HTTP status
  std::string type;                  // invalid_request_error, not_found_error, ...
  std::optional<std::string> param;  // the request field at fault, when one is
  std::optional<std::string> code;   // machine-readable reason, when there is one
};

// 400 invalid_request_error naming the field.
inline ApiError invalid_request(std::string message, std::optional<std::string> param = std::nullopt,
                                std::optional<std::string> code = std::nullopt) {
  return ApiError(400, std::move(message), "invalid_request_error", std::move(param), std::move(code));
}

}  // namespace pypto
