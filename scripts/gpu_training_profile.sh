#!/usr/bin/env bash
# Where a training step's host time goes (scripts/profile_training_loop.py), on the H200, in one
# short call; the text comes back as $OUT/training_profile.log.
LOG_NAME=training_profile.log source "$(dirname "$0")/gpu_common.sh"
step 240 profile python3 scripts/profile_training_loop.py
