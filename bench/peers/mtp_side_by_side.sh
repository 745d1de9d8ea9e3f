#!/usr/bin/env bash
# MTP speculative decoding of pypto-serving and llama.cpp side by side: spec_side_by_side.sh with
# METHOD mtp (its header describes the arguments and what is measured).
#
#   bench/peers/mtp_side_by_side.sh MODEL_DIR MODEL-MTP.gguf LLAMA_BIN_DIR [ROUNDS=3] [THREADS=2]
#                                   [KS=1,2,3] [TOKENS=64] [PROMPT_LEN=32] [QUANT=int4] [PRECISION=medium]
#                                   [PROMPT_SEED=7]
exec "$(dirname "${BASH_SOURCE[0]}")/spec_side_by_side.sh" mtp "$@"
