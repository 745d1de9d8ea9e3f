#pragma once
// EAGLE-3 draft heads for dense test checkpoints (make-test-model --eagle3 KIND, TestModelOptions::
// eagle3), written in the published layout (config.json with LlamaForCausalLMEagle3, midlayer.*,
// fc, norm, lm_head, d2t; model/eagle3_head.h):
//  - "random": random weights (norms 1 ± 0.2, projections std 1/sqrt(fan_in)), its own
//    embed_tokens, a draft vocabulary of the even target ids (d2t), aux layers given explicitly
//    (0, N/2, N-1), the residual from h (norm_before_residual false): drafts rarely right.
//  - "oracle", over a target whose every o_proj and down_proj is zero (its next token is
//    f(x) = argmax lm_head(norm(embed(x))), a function of the current token x alone): the head
//    drafts f(x) for its input token x. Its attention reads only the token's half of [e | g]:
//    q = k = 32·ê and v = ê per head (ê: the RMS-normed embedding, input_layernorm = 1, head
//    channels = hidden channels), so a row's own key outscores every other token's by thousands
//    and the softmax weight of every other token underflows to exactly 0 — the attention output
//    is the row's own ê (or an average of identical ê); o_proj = I; hidden_norm = 0 with
//    norm_before_residual, so the residual starts at 0 and neither fc nor a fed-back hidden
//    state reaches the output; down_proj = 0; the final norm and lm_head are the target's. The
//    head's logits are then the target's for x up to rounding (norm(ê) vs norm(e): a uniform
//    scale), so every greedy draft is the target's next token. The default aux layers are used.
//  - "oracle-half": the oracle over the even target ids only (draft_vocab_size = vocab / 2,
//    d2t[i] = i, lm_head rows 2i): a draft is right exactly when f(x) is even.
#include <cstdint>
#include <string>

namespace pypto {

// Throws Error unless `kind` is random, oracle or oracle-half and `dense_float` (a dense causal
// preset, unquantized, Qwen3).
void check_eagle3_test_head_kind(const std::string& kind, bool dense_float);

// Writes the head for the target checkpoint in `target_dir` (one model.safetensors) into `out_dir`.
void make_eagle3_test_head(const std::string& target_dir, const std::string& out_dir, const std::string& kind,
                           uint64_t seed);

}  // namespace pypto
