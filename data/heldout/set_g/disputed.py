"""Kernels the grader refused that I believe are correct.  None in set G: every refusal I met
was a rule the step states (see REPORT_set_g.md), so nothing is disputed."""
import ropelab  # noqa: F401

DISPUTED = []
