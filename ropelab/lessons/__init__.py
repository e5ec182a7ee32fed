"""What the lessons (the notebooks) draw, print and quote around the kernels; nothing here is a
kernel, and nothing here grades (that is :mod:`ropelab.grader`).

One module per concern:

* :mod:`.tracing`: thread maps read off the real kernels under the simulator;
* :mod:`.plots`: charts of thread maps and of recorded GPU data (:mod:`.model_plots`: notebook
  09's);
* :mod:`.tables`: tables and quoted numbers from the records under ``data/``;
* :mod:`.numbers` (with ``numbers_*``): every measured figure the prose quotes, rendered from its
  record when a notebook or the README is built;
* :mod:`.checks`: the notebooks' PASS/FAIL line against the float64 reference;
* :mod:`.display`: kernel source read from the package, whole or by marked region;
  :mod:`.specialise` and :mod:`.branches`: a marked region as one build of a kernel factory
  compiles it;
* :mod:`.primer`: the pictures and numbers of notebook 00's CUDA primer;
* :mod:`.glossary`: the terms every notebook defines before it uses them;
* :mod:`.ledger`: the seed-claims ledger of notebook 07 and the README;
* :mod:`.prediction`: notebook 07's table of the predicted H200 time against the recorded.

The names notebooks use are re-exported here: ``from ropelab import lessons`` and
``lessons.trace_threads(...)``.
"""

from .checks import Check, check
from .display import excerpt, source
from .model_plots import plot_layer_times, plot_loss_curves
from .plots import (plot_all_variants, plot_freq_drift, plot_fused_map, plot_launch_overhead,
                    plot_precision, plot_roof, plot_sincos_error, plot_thread_map)
from .primer import (paper_budget, plot_compile_pipeline, plot_execution_model,
                     sectors_touched)
from .specialise import specialised
from .tables import (COPY_ROWS, bench_row, bench_table, case_label, copy_table, drift_table,
                     live_bench, noise_table, precision_table, provenance, public_path_table,
                     public_vs_kernel, recorded, recorded_runs, relative_times, repeat_gaps,
                     roof_gbps, run_to_run, share_of_roof, sincos_table, spread)
from .tracing import FusedMap, ThreadMap, trace_fused, trace_threads

__all__ = [
    "bench_row", "bench_table", "case_label", "check", "Check", "COPY_ROWS", "copy_table",
    "drift_table", "excerpt", "FusedMap", "live_bench", "noise_table", "paper_budget",
    "plot_all_variants", "plot_compile_pipeline", "plot_execution_model", "plot_freq_drift",
    "plot_fused_map", "plot_launch_overhead", "plot_layer_times", "plot_loss_curves",
    "plot_precision", "plot_roof", "plot_sincos_error", "plot_thread_map", "precision_table",
    "provenance", "public_path_table", "public_vs_kernel", "recorded", "recorded_runs",
    "relative_times", "repeat_gaps", "roof_gbps", "run_to_run", "sectors_touched",
    "share_of_roof", "sincos_table", "source", "specialised", "spread", "ThreadMap",
    "trace_fused", "trace_threads",
]
