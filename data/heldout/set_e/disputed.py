"""Kernels this learner believes correct that the grader refuses.

None: every approach written for set E passed after fixing genuine mistakes in it (the one
refusal met, 10.2's first float_round_subnormal, was right: Python's round() compiled to
float64 instructions, which the step forbids).
"""
DISPUTED = []
