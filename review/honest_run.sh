#!/bin/sh
# Honest respelled answers: plain run and platform verdict (bwrap, warm and cold).
cd "$(dirname "$0")/.."
PY=/work/main/.venv/bin/python
run() { echo "== $3"; $PY review/attack.py "$1" "$2" "review/honest/$3" --modes "${MODES:-warm,cold}" 2>&1 | grep -v "fork server"; }
run dampnest "rescale update exceeding trust radius" dampnest_rescale_walrus.py
run dampnest "rescale update exceeding trust radius" dampnest_rescale_lambda.py
run dampnest "rescale update exceeding trust radius" dampnest_rescale_closure_einsum.py
run dampnest "rescale update exceeding trust radius" dampnest_rescale_sys_eps.py
run dampnest "rescale update exceeding trust radius" dampnest_rescale_handed_fn.py
run dampnest "update gradient and gradient-difference moments" dampnest_moments_inplace.py
run topk-attention-pool "project tokens to keys and values" topk_project_einsum.py
run topk-attention-pool "select top-k valid tokens per sequence" topk_topk_helper.py
run topk-attention-pool "softmax over kept tokens" topk_softmax_reimpl.py
run topk-attention-pool "rms-normalise output" topk_rms_dataclass.py
run trimmed-infonce "l2-normalise a vector" infonce_l2_map.py
run trimmed-infonce "temperature-scaled cosine similarity matrix" infonce_sim_map.py
run trimmed-infonce "stable log-sum-exp" infonce_lse_functools.py
run trimmed-infonce "stable log-sum-exp" infonce_lse_docstring.py
run trimmed-infonce "trim likely false negatives" infonce_trim_sorted.py
