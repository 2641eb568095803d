#!/bin/sh
# Every hostile answer of this review: plain run (no guard), then the platform's verdict on bwrap, warm and cold.
cd "$(dirname "$0")/.."
PY=/work/main/.venv/bin/python
run() { echo "== $3 ($1: $2)"; $PY review/attack.py "$1" "$2" "review/answers/$3" --modes "${MODES:-warm,cold}" 2>&1 | grep -v "fork server"; }
run trimmed-infonce "l2-normalise a vector" infonce_l2_inplace.py
run topk-attention-pool "length-adaptive temperature per sequence" topk_temp_masktrim.py
run dampnest "rescale update exceeding trust radius" dampnest_norm_linalg_internal.py
run topk-attention-pool "softmax over kept tokens" topk_softmax_utils_globals.py
run dampnest "rescale update exceeding trust radius" dampnest_rescale_shouldstop.py
run dampnest "parameter step with decoupled weight decay" dampnest_weightdecay_umr_all.py
run topk-attention-pool "latk pooling forward pass" topk_forward_umr_all.py
run dampnest "damping ratio and damped momentum coefficient" dampnest_damping_flat_rng.py
run trimmed-infonce "trimmed infonce objective" infonce_objective_teardown_restore.py
run topk-attention-pool "rms-normalise output" topk_rms_teardown_restore.py
run topk-attention-pool "rms-normalise output" topk_rms_forge_counted_result.py
