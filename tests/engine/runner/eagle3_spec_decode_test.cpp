// EAGLE-3 speculative decoding (model/eagle3_head.h, engine/eagle3_executor.h) through the engine
// over a tiny dense Qwen3 target (4 layers) with heads from make-test-model --eagle3
// (model/test_model_eagle3.h):
//  - "oracle": the target's next token depends only on the current one and the head drafts
//    exactly that token, so every greedy draft must be accepted (k = 1, 2, 3);
//  - "oracle-half": the same over a draft vocabulary of the even ids (d2t), so a draft is right
//    exactly when the target's token is even: the accepted count must equal that prediction;
//  - "random": random head weights (drafts rarely right).
// In every case greedy output equals the run without speculation token for token — alone,
// batched with chunked prefill, and prefix-cached. The target's captured aux states are checked
// against the residual stream computed independently (the embedding, for layer 0).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <fstream>
#include <map>

#include "engine/eagle3_executor.h"
#include "engine/speculative_config.h"
#include "io/safetensors.h"
#include "model/mtp_head.h"
#include "model_harness.h"
#include "spec_test_engine.h"
#include "stretch_drafter.h"

namespace pypto {
namespace {

using Ids = std::vector<int32_t>;

struct Target {
  std::string dir;
  std::unique_ptr<test::LoadedModel> m;
  std::shared_ptr<const Eagle3Weights> head;
};

// A 4-layer target of `preset` (tiny: dense Qwen3; tiny-moe: Qwen3-MoE) with a head of `kind`.
Target& target(const std::string& kind, const std::string& preset = "tiny") {
  static std::map<std::string, Target> targets;
  Target& t = targets[preset + "-" + kind];
  if (!t.m) {
    TestModelOptions o;
    o.preset = preset;
    o.layers = 4;
    o.eagle3 = kind;
    t.dir = test::ensure_test_model(preset + "-eagle3-" + kind, o);
    t.m = test::load_model(t.dir, /*scalar=*/false, 2);
    t.head = load_eagle3_weights(read_eagle3_config(t.dir + "/eagle3"), t.m->weights.config, *t.m->backend);
  }
  return t;
}

using Setup = test::SpecTestSetup;
using Outcome = test::SpecTestOutcome;
constexpr test::SpecTestPool kPool;  // the engine's KV pool

// The engine over target(kind), drafting with its head when s.k > 0 (cost model off).
test::SpecTestEngine eagle3_engine(const std::string& kind, const Setup& s, const std::string& preset = "tiny") {
  Target& t = target(kind, preset);
  test::LoadedModel& m = *t.m;
  return test::SpecTestEngine(*m.model, s, [&](EngineConfig& c, KvCache& cache) -> std::unique_ptr<ModelExecutor> {
    c.scheduler.speculative.method = SpeculativeMethod::Eagle3;
    c.scheduler.speculative.draft_model = t.dir + "/eagle3";
    auto head = std::make_shared<Eagle3Head>(t.head, m.weights, *m.backend);
    // F32: the oracle's attention passes the normed embedding through exactly.
    auto head_cache = std::make_shared<KvCache>(head->kv_cache_spec(kPool.blocks + 64, kPool.block_size, DType::F32));
    auto drafter = make_eagle3_proposer(m.weights.config, *head, *head_cache);
    c.drafter = drafter;
    // The drafter (held by the executor and the engine) keeps the head and its KV alive.
    drafter->keep_alive({std::shared_ptr<const void>(head), std::shared_ptr<const void>(head_cache)});
    return std::make_unique<Eagle3Executor>(*m.model, cache, *head, drafter);
  });
}

Outcome run_once(const std::string& kind, const Setup& s, const std::vector<Ids>& prompts, int32_t max_tokens,
                 const std::string& preset = "tiny") {
  return eagle3_engine(kind, s, preset).run(prompts, max_tokens);
}

TEST(Eagle3SpecDecode, OracleHeadHasEveryGreedyDraftAcceptedAndChangesNothing) {
  const std::vector<Ids> ps = test::spec_test_prompts(2);
  const Outcome plain = run_once("oracle", {}, ps, 16);
  for (int32_t k = 1; k <= 3; ++k) {
    SCOPED_TRACE("k = " + std::to_string(k));
    const Outcome spec = run_once("oracle", {.k = k}, ps, 16);
    EXPECT_EQ(plain.tokens, spec.tokens);
    EXPECT_GT(spec.stats.num_draft_tokens, 0);
    EXPECT_EQ(spec.stats.num_accepted_tokens, spec.stats.num_draft_tokens) << "an oracle draft was rejected";
  }
}

// A Qwen3-MoE target (tiny-moe: routed experts in every layer): the aux states are captured from
// the residual stream as on a dense target, the oracle (every expert's down_proj zero too) has every
// greedy draft accepted, and a random head's rejections change nothing, batched with chunked
// prefill.
TEST(Eagle3SpecDecode, QwenMoeTargetOracleAcceptsEveryDraftAndARandomHeadChangesNothing) {
  const std::vector<Ids> ps = test::spec_test_prompts(2);
  const Outcome plain = run_once("oracle", {}, ps, 16, "tiny-moe");
  for (int32_t k = 1; k <= 3; ++k) {
    SCOPED_TRACE("oracle, k = " + std::to_string(k));
    const Outcome spec = run_once("oracle", {.k = k}, ps, 16, "tiny-moe");
    EXPECT_EQ(plain.tokens, spec.tokens);
    EXPECT_GT(spec.stats.num_draft_tokens, 0);
    EXPECT_EQ(spec.stats.num_accepted_tokens, spec.stats.num_draft_tokens) << "an oracle draft was rejected";
  }
  const std::vector<Ids> batch = test::spec_test_prompts(3, 20);
  const Outcome rplain = run_once("random", {}, batch, 20, "tiny-moe");
  const Outcome rspec = run_once("random", {.k = 2, .threshold = 7}, batch, 20, "tiny-moe");
  EXPECT_EQ(rplain.tokens, rspec.tokens);
  EXPECT_GT(rspec.stats.num_draft_tokens, 0);
  EXPECT_LT(rspec.stats.num_accepted_tokens, rspec.stats.num_draft_tokens) << "a random head accepted every draft";
}

// k = 1: the draft after token y is the target's next token when that is even (d2t maps the draft
// vocabulary onto the even ids), another even token otherwise.
TEST(Eagle3SpecDecode, HalfVocabularyOracleAcceptsExactlyTheEvenTokens) {
  const Ids prompt = test::spec_test_prompts(1)[0];
  constexpr int32_t kTokens = 30;
  const Outcome plain = run_once("oracle-half", {}, {prompt}, kTokens);
  const Outcome spec = run_once("oracle-half", {.k = 1}, {prompt}, kTokens);
  EXPECT_EQ(plain.tokens, spec.tokens);
  const Ids& out = plain.tokens.at("p0");
  const auto [drafted, accepted] = test::replay_k1_acceptance(out, kTokens, [&](size_t o) { return out[o] % 2 == 0; });
  EXPECT_EQ(spec.stats.num_draft_tokens, drafted);
  EXPECT_EQ(spec.stats.num_accepted_tokens, accepted);
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, drafted) << "every token was even: not a partial acceptance";
}

TEST(Eagle3SpecDecode, BatchedChunkedAndPrefixCachedOutputsAreUnchanged) {
  const std::vector<Ids> ps = test::spec_test_prompts(3, 20);
  {  // random head: drafts mostly rejected, 7-token chunks, a 40-token budget
    const Outcome plain = run_once("random", {}, ps, 10);
    const Outcome spec = run_once("random", {.k = 2, .threshold = 7, .budget = 40}, ps, 10);
    EXPECT_EQ(plain.tokens, spec.tokens);
    EXPECT_GT(spec.stats.num_draft_tokens, 0);
    EXPECT_LT(spec.stats.num_accepted_tokens, spec.stats.num_draft_tokens) << "a random head agreed everywhere";
  }
  const Outcome plain = run_once("oracle-half", {}, ps, 12);
  EXPECT_EQ(plain.tokens, run_once("oracle-half", {.k = 2, .threshold = 7, .budget = 40}, ps, 12).tokens);
  test::SpecTestEngine cached = eagle3_engine("oracle-half", {.k = 3, .prefix_caching = true});
  EXPECT_EQ(plain.tokens, cached.run(ps, 12, "p").tokens);
  const Outcome again = cached.run(ps, 12, "p");  // resumes from the prefix cache
  EXPECT_EQ(plain.tokens, again.tokens);
  EXPECT_GT(again.hits, 0) << "no prefix-cache hit";
  EXPECT_GT(again.stats.num_accepted_tokens, 0);
}

TEST(Eagle3SpecDecode, SeededSamplingRunsThroughRejectionSampling) {
  const Outcome spec = run_once("oracle-half", {.k = 2, .temperature = 0.8f}, test::spec_test_prompts(1), 12);
  for (const auto& [id, t] : spec.tokens) EXPECT_EQ(t.size(), 12u) << id;
  EXPECT_GT(spec.stats.num_draft_tokens, 0);
}

// Forwards to the EAGLE-3 drafter; engine steps [off_from, off_to) (counted by the scheduler's one
// set_context_needed() per step) run as the cost model runs a stretch with speculation off: the
// drafter is told its context is not needed and nobody drafts. fused_at[s]: the head's fused rows
// when step s began.
class StretchDrafter final : public test::StretchDrafterBase {
 public:
  StretchDrafter(std::shared_ptr<MtpProposer> mtp, const Eagle3Head& head) : StretchDrafterBase(std::move(mtp)), head_(head) {}

  std::vector<int64_t> fused_at;
  // Per request, per position p of the verified token drafted after: the step and the drafts.
  std::map<std::string, std::map<int64_t, std::pair<int64_t, Ids>>> at_position;

 private:
  void drafted(const Request& req, const std::vector<int32_t>& out) override {
    at_position[req.request_id][req.num_computed_tokens] = {step(), out};
  }
  void step_began() override { fused_at.push_back(head_.fused_rows()); }
  const Eagle3Head& head_;
};

// What speculation costs while the cost model has it off: the head's fc (a [3H → H] product per
// row) runs only on rows a drafting pass reads, so the plain steps of a stretch fuse nothing; the
// rows they captured are fused when drafting resumes and the context stays whole (the oracle has
// every draft accepted after the stretch), the output the plain run's.
struct StretchRun {
  Outcome out;
  std::shared_ptr<StretchDrafter> drafter;
};

// Greedy, k = 2, speculation off in engine steps [off_from, off_to) (none: -1, -1).
StretchRun run_with_stretch(const std::string& kind, const std::vector<Ids>& ps, int32_t tokens, int64_t off_from,
                            int64_t off_to) {
  Target& t = target(kind);
  test::LoadedModel& m = *t.m;
  StretchRun r;
  test::SpecTestEngine e(*m.model, {.k = 2}, [&](EngineConfig& c, KvCache& cache) -> std::unique_ptr<ModelExecutor> {
    c.scheduler.speculative.method = SpeculativeMethod::Eagle3;
    c.scheduler.speculative.draft_model = t.dir + "/eagle3";
    auto head = std::make_shared<Eagle3Head>(t.head, m.weights, *m.backend);
    auto head_cache = std::make_shared<KvCache>(head->kv_cache_spec(kPool.blocks + 64, kPool.block_size, DType::F32));
    auto mtp = make_eagle3_proposer(m.weights.config, *head, *head_cache);
    mtp->keep_alive({std::shared_ptr<const void>(head), std::shared_ptr<const void>(head_cache)});
    r.drafter = std::make_shared<StretchDrafter>(mtp, *head);
    r.drafter->off_from = off_from;
    r.drafter->off_to = off_to;
    c.drafter = r.drafter;
    return std::make_unique<Eagle3Executor>(*m.model, cache, *head, mtp);
  });
  r.out = e.run(ps, tokens);
  return r;
}

// What speculation costs while the cost model has it off: the head's fc (a [3H → H] product per
// row) runs only on rows a drafting pass reads, so the plain steps of a stretch fuse nothing; the
// rows they captured are fused when drafting resumes and the context stays whole: the oracle has
// every draft accepted after the stretch, and a random head (whose drafts depend on every fused
// row its attention reads) drafts after the stretch what it drafts at the same positions without
// one. Output is the plain run's.
TEST(Eagle3SpecDecode, StepsWithSpeculationOffRunNoFusion) {
  const std::vector<Ids> ps = test::spec_test_prompts(2);
  constexpr int32_t kTokens = 30;
  // The random head's drafts are all rejected: its SpecThrottle drafts in steps 1-4, pauses in
  // steps 5-12 and drafts again in steps 13-16. The stretch is that pause, so both random runs
  // draft at the same positions and differ only in how the head's context was kept.
  constexpr int64_t kOffFrom = 5, kOffTo = 13;
  const Outcome plain = run_once("oracle", {}, ps, kTokens);
  const StretchRun oracle = run_with_stretch("oracle", ps, kTokens, kOffFrom, kOffTo);
  EXPECT_EQ(plain.tokens, oracle.out.tokens);
  const std::vector<int64_t>& f = oracle.drafter->fused_at;
  ASSERT_GT(f.size(), size_t(kOffTo + 1)) << "the run ended inside the stretch";
  EXPECT_GT(f[kOffFrom], 0) << "the steps before the stretch fused nothing";
  EXPECT_EQ(f[kOffTo], f[kOffFrom]) << "steps with speculation off ran the head's fc";
  EXPECT_GE(f[kOffTo + 1] - f[kOffTo], kOffTo - kOffFrom) << "the rows of the stretch were not fused on resuming";
  EXPECT_GT(oracle.out.stats.num_draft_tokens, 0);
  EXPECT_EQ(oracle.out.stats.num_accepted_tokens, oracle.out.stats.num_draft_tokens)
      << "the context broke over the stretch";

  const Outcome rplain = run_once("random", {}, ps, kTokens);
  const StretchRun on = run_with_stretch("random", ps, kTokens, -1, -1);
  const StretchRun off = run_with_stretch("random", ps, kTokens, kOffFrom, kOffTo);
  EXPECT_EQ(rplain.tokens, on.out.tokens);
  EXPECT_EQ(rplain.tokens, off.out.tokens);
  int compared = 0;
  for (const auto& [id, by_pos] : off.drafter->at_position)
    for (const auto& [p, drafted] : by_pos) {
      if (drafted.first < kOffTo) continue;
      const auto& on_pos = on.drafter->at_position.at(id);
      if (auto it = on_pos.find(p); it != on_pos.end()) {
        EXPECT_EQ(drafted.second, it->second.second) << id << " at position " << p;
        ++compared;
      }
    }
  EXPECT_GE(compared, 8) << "too few positions drafted in both runs after the stretch";
}

// The target's captured residual stream entering layer 0 is the embedding of each token, and a
// forward with capture on gives the same logits as one without.
TEST(Eagle3SpecDecode, TheTargetCapturesAuxStatesWithoutChangingItsLogits) {
  test::LoadedModel& m = *target("random").m;
  const Ids prompt = test::spec_test_prompts(1)[0];
  const int64_t T = int64_t(prompt.size()), H = m.model->hidden_size(), V = m.model->vocab_size();
  auto run = [&](bool capture, std::vector<float>& aux) {
    KvCache cache(m.model->kv_cache_spec(4, kPool.block_size, DType::F32));
    ForwardBatch b;
    b.max_blocks_per_seq = 4;
    const int32_t blocks[4] = {0, 1, 2, 3};
    b.add_sequence(prompt.data(), int32_t(T), 0, blocks, 4, kPool.block_size, ForwardBatch::Logits::All);
    std::vector<float> logits(size_t(T * V));
    aux.assign(size_t(T * 3 * H), 0.0f);
    if (capture) m.model->set_aux_hidden_out({0, 2, 3}, aux.data());
    m.model->forward(b, cache, logits.data());
    m.model->set_aux_hidden_out({}, nullptr);
    return logits;
  };
  std::vector<float> aux, none;
  EXPECT_EQ(run(true, aux), run(false, none));
  for (float v : none) ASSERT_EQ(v, 0.0f) << "captured while off";
  std::vector<float> e(static_cast<size_t>(H));
  std::vector<int32_t> scratch;
  for (int64_t t = 0; t < T; ++t) {
    MtpHead::lookup_embedding(m.weights, *m.backend, nullptr, &prompt[size_t(t)], 1, e.data(), scratch);
    for (int64_t j = 0; j < H; ++j) ASSERT_EQ(aux[size_t(t * 3 * H + j)], e[size_t(j)]) << "row " << t;
    bool differs = false;  // layer 2's input is not the embedding any more
    for (int64_t j = 0; j < H; ++j) differs |= aux[size_t(t * 3 * H + H + j)] != e[size_t(j)];
    EXPECT_TRUE(differs) << "row " << t;
  }
}

// --- refusals ------------------------------------------------------------------------------

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

// A copy of the random head in a fresh directory, config.json edited by `edit`, tensors by `tensors`.
std::string head_variant(const std::string& name, const std::function<void(nlohmann::json&)>& edit,
                         const std::function<void(std::vector<SafetensorWrite>&)>& tensors = nullptr) {
  namespace fs = std::filesystem;
  const std::string src = target("random").dir + "/eagle3";
  const std::string dir = testing::TempDir() + "/eagle3-" + name + "-" + std::to_string(::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(src + "/config.json"));
  edit(cfg);
  std::ofstream(dir + "/config.json") << cfg.dump(2);
  auto file = std::shared_ptr<SafetensorsFile>(SafetensorsFile::open(src + "/model.safetensors").release());
  std::vector<SafetensorWrite> t;
  for (const SafetensorInfo& i : file->tensors()) {
    const SafetensorInfo* p = &i;
    t.push_back({i.name, i.dtype, i.shape, [file, p](uint8_t* dst) { std::memcpy(dst, file->data(*p), p->end - p->begin); }});
  }
  if (tensors) tensors(t);
  write_safetensors(dir + "/model.safetensors", t);
  return dir;
}

std::string load_error(const std::string& dir) {
  test::LoadedModel& m = *target("random").m;
  return error_of([&] { load_eagle3_weights(read_eagle3_config(dir), m.weights.config, *m.backend); });
}

TEST(Eagle3Config, SpeculativeConfigParsesAndRefusesByName) {
  const std::string head = target("random").dir + "/eagle3";
  const SpeculativeConfig c = parse_speculative_config(R"({"model": ")" + head + R"(", "num_speculative_tokens": 2})");
  EXPECT_EQ(c.method, SpeculativeMethod::Eagle3) << "method not inferred from the architecture";
  EXPECT_EQ(c.draft_model, head);
  EXPECT_NE(error_of([&] {
              parse_speculative_config(R"({"method": "eagle3", "model": "x", "num_speculative_tokens": 2, "quantization": "int8"})");
            }).find("'quantization' does not apply to method eagle3"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_speculative_config(R"({"method": "eagle3", "num_speculative_tokens": 2})"); })
                .find("method eagle3 needs 'model'"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_speculative_config(R"({"method": "eagle", "model": "x", "num_speculative_tokens": 2})"); })
                .find("method \"eagle\" is not supported"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_speculative_config(R"({"method": "eagle3", "model": "x", "num_speculative_tokens": 2, "foo": 1})"); })
                .find("unknown key 'foo'"),
            std::string::npos);
}

TEST(Eagle3Config, InconsistentHeadsAreRefusedNamingTheFieldOrTensor) {
  EXPECT_NE(load_error(head_variant("hidden", [](nlohmann::json& c) { c["hidden_size"] = 128; })).find("'hidden_size' is 128"),
            std::string::npos);
  EXPECT_NE(load_error(head_variant("vocab", [](nlohmann::json& c) { c["vocab_size"] = 200000; })).find("'vocab_size' is 200000"),
            std::string::npos);
  EXPECT_NE(load_error(head_variant("aux", [](nlohmann::json& c) { c["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = {0, 1, 4}; }))
                .find("eagle_aux_hidden_state_layer_ids' (0, 1, 4) name target layer 4, outside the target's 4 layers"),
            std::string::npos);
  EXPECT_NE(load_error(head_variant("layers", [](nlohmann::json& c) { c["num_hidden_layers"] = 2; })).find("'num_hidden_layers' is 2"),
            std::string::npos);
  EXPECT_NE(load_error(head_variant("arch", [](nlohmann::json& c) { c["architectures"] = {"LlamaForCausalLM"}; }))
                .find("'architectures' must name an EAGLE-3 head"),
            std::string::npos);
  auto drop = [](const std::string& name) {
    return [name](std::vector<SafetensorWrite>& t) {
      std::erase_if(t, [&](const SafetensorWrite& w) { return w.name == name; });
    };
  };
  EXPECT_NE(load_error(head_variant("nod2t", [](nlohmann::json&) {}, drop("d2t"))).find("tensor 'd2t' (draft id → target id offsets) is missing"),
            std::string::npos);
  EXPECT_NE(load_error(head_variant("nofc", [](nlohmann::json&) {}, drop("fc.weight"))).find("tensor 'fc.weight'"),
            std::string::npos);
  EXPECT_NE(load_error(head_variant("extra", [](nlohmann::json&) {},
                                    [](std::vector<SafetensorWrite>& t) {
                                      t.push_back({"midlayer.extra.weight", DType::F32, {4}, [](uint8_t* d) { std::memset(d, 0, 16); }});
                                    }))
                .find("tensor 'midlayer.extra.weight' is not part of an EAGLE-3 head"),
            std::string::npos);
  EXPECT_NE(load_error(head_variant("shape", [](nlohmann::json& c) { c["intermediate_size"] = 96; })).find("has shape"),
            std::string::npos);
  // Against other targets: a hybrid, and a 2-layer target for the default aux layers (2, 1, -1).
  const Eagle3Config oracle = read_eagle3_config(target("oracle").dir + "/eagle3");
  ModelConfig t = target("oracle").m->weights.config;
  t.num_hidden_layers = 2;
  EXPECT_NE(error_of([&] { check_eagle3_target(oracle, t); })
                .find("the default auxiliary layers (2, N/2, N-3) (2, 1, -1) name target layer 2, outside the target's 2 layers"),
            std::string::npos);
  t = target("oracle").m->weights.config;
  t.arch = ModelArch::Qwen35;
  EXPECT_NE(error_of([&] { check_eagle3_target(oracle, t); }).find("method eagle3 drafts for Qwen3, Qwen3-MoE"), std::string::npos);
}

}  // namespace
}  // namespace pypto
