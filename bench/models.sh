# bench/models.sh - sourced by bench/model.sh and bench/llamacpp.sh: the
# issue-#3 benchmark models and their files in build/bench-models/.
#   bench_model_name M   "tinyllama:TYPE" for a bare TYPE, else M
#   bench_model_path M   the file of model M
#   bench_models_ensure "M1 M2 ..."   writes each missing file with
#     `$BIN gen-model` (minutes the first time), and rewrites a file that
#     predates the no-vocabulary keys (tokenizer.ggml.model "none",
#     ARCH.vocab_size: llama.cpp's loader needs them; same weights)
# The mixture-of-experts shapes gpt-oss-20b:MXFP4 and qwen3-30b-a3b:Q4_K_M
# (testgen_arch.h: released shapes and types) are written with
# MOE_LAYERS (default 2) of their layers, the count in the file name:
# each layer keeps its real shape, so bytes per token and the bound are
# those of a shallower model of the same width. The dense shapes of issue
# #26, gemma-3-1b:TYPE and phi-4-mini:TYPE, and issue #30's hybrid
# qwen3.5-4b:TYPE (testgen_arch.h; TYPE any tensor type or Q4_K_M), are
# written whole.
MOE_LAYERS=${MOE_LAYERS:-2}
BIN=${PARLEY_BIN:-./build/parley} # the parley binary (PARLEY_BIN: A/B of two builds)
BENCH_MODELS_DEFAULT="tinyllama:F16 tinyllama:Q8_0 tinyllama:Q4_0 tinyllama:Q4_K_M qwen2.5-0.5b:Q8_0 qwen2.5-0.5b:Q4_K_M"
bench_model_name() { case $1 in *:*) echo "$1" ;; *) echo "tinyllama:$1" ;; esac; }
bench_model_arch() {
  case ${1%%:*} in gpt-oss-20b) echo gpt-oss ;; qwen3-30b-a3b) echo qwen3moe ;; gemma-3-1b) echo gemma3 ;; phi-4-mini) echo phi3 ;; qwen3.5-4b) echo qwen35 ;; esac
}
# the shapes written with MOE_LAYERS of their layers (the others whole)
bench_model_cut() { case ${1%%:*} in gpt-oss-20b | qwen3-30b-a3b) return 0 ;; esac; return 1; }
bench_model_path() {
  local m; m=$(bench_model_name "$1")
  if bench_model_cut "$m"; then echo "build/bench-models/${m%%:*}-${m#*:}-L$MOE_LAYERS.gguf"
  else echo "build/bench-models/${m%%:*}-${m#*:}.gguf"; fi
}
bench_models_ensure() {
  local m f
  mkdir -p build/bench-models
  for m in $1; do
    m=$(bench_model_name "$m")
    f=$(bench_model_path "$m")
    # grep reads all 64 KiB (no -q): an early exit would kill head with
    # SIGPIPE, which pipefail turns into "missing" and a rewrite each run
    if [ ! -f "$f" ] || ! head -c 65536 "$f" | grep -a tokenizer.ggml.model >/dev/null; then
      echo "generating $f"
      if bench_model_cut "$m"; then
        "$BIN" gen-model "$f" --arch "$(bench_model_arch "$m")" --shape "${m%%:*}" --layers "$MOE_LAYERS" >/dev/null
      elif [ -n "$(bench_model_arch "$m")" ]; then # a dense or hybrid real shape, whole
        "$BIN" gen-model "$f" --arch "$(bench_model_arch "$m")" --shape "${m%%:*}" --type "${m#*:}" >/dev/null
      else
        "$BIN" gen-model "$f" --shape "${m%%:*}" --type "${m#*:}" >/dev/null
      fi
    fi
  done
}
