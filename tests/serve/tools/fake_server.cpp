// pypto_fake_server: the real HTTP server over the scripted stand-in model (support/
// script_engine.h), for client-compatibility tests that must not depend on model weights.
//   pypto_fake_server [--port N] [--api-key K] [--max-queued-requests N] [--step-delay-ms N]
//                     [--max-model-len N] [--max-num-seqs N] [--generate-config JSON]
//                     [--request-timeout S] [--served-model-name NAME]
// Prints the listening address through the server's log and serves until SIGINT/SIGTERM.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "serve/openai_protocol.h"
#include "support/script_engine.h"

int main(int argc, char** argv) {
  pypto::ServerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.served_model_name = "qwen3-script";
  int delay = 0;
  int64_t max_model_len = 256;
  int32_t max_num_seqs = 4;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--port") o.port = std::stoi(next());
    else if (a == "--api-key") o.api_key = next();
    else if (a == "--max-queued-requests") o.max_queued_requests = std::stoll(next());
    else if (a == "--step-delay-ms") delay = std::stoi(next());
    else if (a == "--max-model-len") max_model_len = std::stoll(next());
    else if (a == "--max-num-seqs") max_num_seqs = std::stoi(next());
    else if (a == "--generate-config") o.generate_config = nlohmann::json::parse(next());
    else if (a == "--request-timeout") o.request_timeout_s = std::stod(next());
    else if (a == "--served-model-name") o.served_model_name = next();
    else {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  pypto::validate_generate_config(o.generate_config);
  std::unique_ptr<pypto::testing::ScriptEngine> engine;
  const int rc = pypto::run_server(o, [&] {
    engine = pypto::testing::make_script_engine(max_model_len, max_num_seqs);
    engine->delay_ms->store(delay);
    return engine->context;
  });
  if (engine) engine->loop->shutdown();
  return rc;
}
