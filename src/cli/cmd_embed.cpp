// pypto-serving embed: embeddings (or, for a reranker, scores) offline, for scripts:
//   pypto-serving embed --model DIR (--text T ... | --input FILE) --out FILE.jsonl|FILE.npy
//                       [--dimensions D] [--prompt-name NAME] [--with-token-ids] [engine flags]
// Inputs: --text (repeatable), then the lines of --input: a .jsonl file holds JSON objects, one
// per line: {"text": ...} or {"token_ids": [...]} for an embedding model, {"query": ...,
// "document": ..., "instruction"?: ...} for a reranker; any other file holds one text per line.
// Text gets the tokenizer's post-processor (Qwen3-Embedding appends <|endoftext|>); token ids are
// used as given; --prompt-name prefixes texts with a prompt of config_sentence_transformers.json
// (e.g. query). Output: .npy float32 [inputs, D] (embeddings) or [inputs, 1] (scores); .jsonl
// {"index", "embedding" | "score", "tokens"} per input in input order. Everything is submitted at
// once, so the engine batches the inputs under its token budget as the server does.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/npy_writer.h"
#include "cli/run_options.h"
#include "core/error.h"
#include "core/log.h"
#include "core/progress.h"
#include "model/test_model.h"
#include "parallel/replicas/replica_set.h"
#include "serve/pooling_protocol.h"
#include "serve/rerank_prompt.h"
#include "tokenizer/tokenizer.h"

namespace pypto::cli {
namespace {

using ojson = nlohmann::ordered_json;

struct EmbedInput {
  std::vector<int32_t> ids;
};

std::vector<int32_t> ids_of(const nlohmann::json& v, const std::string& where) {
  if (!v.is_array() || v.empty()) fail(where, ": \"token_ids\" must be a non-empty list of token ids");
  std::vector<int32_t> ids;
  for (const auto& x : v) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX)
      fail(where, ": \"token_ids\" holds ", x.dump(), ", not a token id");
    ids.push_back(int32_t(x.get<int64_t>()));
  }
  return ids;
}

}  // namespace

int cmd_embed(int argc, char** argv) {
  CLI::App app{"pypto-serving embed: embeddings (embedding model) or relevance scores (reranker) of inputs, offline"};
  RunOptions o;
  add_run_options(app, o);
  std::vector<std::string> texts;
  std::string input, out;
  std::optional<int64_t> dimensions;
  std::string prompt_name;
  bool with_ids = false;
  app.add_option("--text", texts, "an input text (repeatable)");
  app.add_option("--input", input, "a file of inputs: .jsonl (JSON objects) or one text per line");
  app.add_option("--out", out, "FILE.npy (float32) or FILE.jsonl")->required();
  app.add_option("--dimensions", dimensions, "Matryoshka: keep the first D values, then normalise");
  app.add_option("--prompt-name", prompt_name, "prefix texts with this prompt of config_sentence_transformers.json");
  app.add_flag("--with-token-ids", with_ids, ".jsonl output: also each input's token ids");
  CLI11_PARSE(app, argc, argv);
  try {
    validate_run_options(o);
    const bool npy = out.ends_with(".npy");
    if (!npy && !out.ends_with(".jsonl")) fail("--out '", out, "' must end in .npy or .jsonl");
    std::string model_dir = o.model.empty() ? ensure_default_model(Progress::enabled()) : o.model;
    LoadedEngine le = load_replicas(replica_load_options(o, model_dir));
    const PoolingConfig& pc = le.config.pooling;
    if (!pc.pooling())
      fail(model_dir, " is served as a generate model: embed needs --runner pooling (an embedding model) or --runner "
                      "rerank (Qwen3-Reranker)");
    const bool score = pc.task == PoolingTask::Score;
    const int64_t hidden = le.config.hidden_size;
    if (dimensions && (score || *dimensions < std::min<int64_t>(32, hidden) || *dimensions > hidden))
      fail("--dimensions ", *dimensions, score ? " does not apply to a reranker" : str_cat(": allowed ", std::min<int64_t>(32, hidden), " to ", hidden));
    std::string prefix;
    if (!prompt_name.empty()) {
      auto it = pc.prompts.find(prompt_name);
      if (it == pc.prompts.end()) fail("--prompt-name '", prompt_name, "': config_sentence_transformers.json has no such prompt");
      prefix = it->second;
    }
    const auto tok = Tokenizer::load(model_dir);
    const int64_t max_len = o.max_model_len;

    std::vector<EmbedInput> inputs;
    auto add_text = [&](const std::string& t, const std::string& where) {
      if (t.empty()) fail(where, ": empty text");
      if (score) fail(where, ": a reranker takes {\"query\", \"document\"} lines in a .jsonl --input");
      inputs.push_back({tok->encode(prefix + t, true)});
    };
    for (size_t i = 0; i < texts.size(); ++i) add_text(texts[i], str_cat("--text #", i + 1));
    if (!input.empty()) {
      std::ifstream f(input);
      if (!f) fail("--input ", input, ": cannot open");
      const bool jsonl = input.ends_with(".jsonl");
      std::string line;
      for (int64_t n = 1; std::getline(f, line); ++n) {
        const std::string where = str_cat(input, " line ", n);
        if (!jsonl) {
          add_text(line, where);
          continue;
        }
        if (line.empty()) continue;
        const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (!j.is_object()) fail(where, ": not a JSON object");
        if (score) {
          if (!j.contains("query") || !j["query"].is_string() || !j.contains("document") || !j["document"].is_string())
            fail(where, ": a reranker line needs string fields \"query\" and \"document\"");
          const std::string instr = j.contains("instruction") ? j["instruction"].get<std::string>()
                                                              : std::string(kQwen3RerankDefaultInstruction);
          inputs.push_back({qwen3_rerank_prompt(*tok, instr, j["query"], j["document"], max_len)});
        } else if (j.contains("token_ids")) {
          inputs.push_back({ids_of(j["token_ids"], where)});
        } else if (j.contains("text") && j["text"].is_string()) {
          add_text(j["text"].get<std::string>(), where);
        } else {
          fail(where, ": expected {\"text\": ...} or {\"token_ids\": [...]}");
        }
      }
    }
    if (inputs.empty()) fail("no inputs: give --text or --input");
    for (size_t i = 0; i < inputs.size(); ++i)
      if (int64_t(inputs[i].ids.size()) > max_len)
        fail("input ", i, " is ", inputs[i].ids.size(), " tokens, more than --max-model-len ", max_len);

    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (size_t i = 0; i < inputs.size(); ++i) {
      EngineRequest req;
      req.request_id = str_cat("embed-", i);
      req.prompt_token_ids = inputs[i].ids;
      req.pooling = true;
      streams.push_back(le.replicas->add_request(req).stream);
    }
    std::vector<std::vector<float>> rows(inputs.size());
    int64_t tokens = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      tokens += int64_t(inputs[i].ids.size());
      while (std::optional<RequestOutput> r = streams[i]->next()) {
        if (!r->finish_reason) continue;
        if (*r->finish_reason != FinishReason::Stop)
          fail("input ", i, " failed: ", r->error.empty() ? finish_reason_name(*r->finish_reason) : r->error);
        rows[i] = std::move(r->pooled);
      }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    const int64_t width = score ? 1 : dimensions.value_or(hidden);
    std::vector<float> flat;
    std::ofstream jl;
    if (!npy) {
      jl.open(out);
      if (!jl) fail("--out ", out, ": cannot write");
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      ojson line = {{"index", i}};
      if (score) {
        const double s = qwen3_rerank_score(rows[i]);
        flat.push_back(float(s));
        line["score"] = s;
        line["logits"] = rows[i];  // [logit(classifier_from_token[0]), logit([1])]
      } else {
        const std::vector<float> v = matryoshka_normalize(rows[i], dimensions, pc.normalize);
        flat.insert(flat.end(), v.begin(), v.end());
        line["embedding"] = v;
      }
      line["tokens"] = inputs[i].ids.size();
      if (with_ids) line["token_ids"] = inputs[i].ids;
      if (!npy) jl << line.dump() << '\n';
    }
    if (npy) write_npy_f32(out, flat.data(), int64_t(rows.size()), width);
    else if (!jl.flush()) fail("--out ", out, ": write failed");
    std::fprintf(stderr, "[embed] %zu inputs, %lld tokens in %.3f s (%.1f inputs/s, %.0f tok/s)\n", rows.size(),
                 static_cast<long long>(tokens), secs, double(rows.size()) / secs, double(tokens) / secs);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "pypto-serving embed: %s\n", e.what());
    return 1;
  }
}

}  // namespace pypto::cli
