"""What the course notebooks need around the kernels; nothing here is a kernel.

One module per concern:

* :mod:`.tracing`: thread maps read off the real kernels under the simulator;
* :mod:`.plots`: charts of thread maps and of recorded GPU data (:mod:`.model_plots`: notebook
  09's);
* :mod:`.tables`: tables and quoted numbers from the records under ``data/``;
* :mod:`.checks`: the notebooks' PASS/FAIL line against the float64 reference;
* :mod:`.display`: kernel source read from the package, whole or by marked region;
* :mod:`.specialise`: a marked region as one build of a kernel factory compiles it;
* :mod:`.primer`: the pictures and numbers of notebook 00's CUDA primer;
* :mod:`.ledger`: the seed-claims ledger of notebook 07 and the README;
* :mod:`.steps`: every notebook's ladder of graded steps (:mod:`.exercises` keeps the old
  one-exercise ids working); around a verdict, :mod:`.coach` with :mod:`.hints` (three levels
  per step) and :mod:`.progress` (the learner's passes), and :mod:`.starters` (empty body or
  skeleton);
* the grader: :mod:`.grading` (the judging), :mod:`.grade_types` (case, verdict), :mod:`.intake`
  (what was handed in), :mod:`.trial`, :mod:`.recording` and :mod:`.launch_records` (one
  recorded run; launches intercepted), :mod:`.judging` (what a run's records say beyond its values: ownership,
  launch rules, host-side work), :mod:`.runner` and :mod:`.child` (the learner's code in a
  forked child with a time limit, the judging in the parent), :mod:`.wire` and :mod:`.carried`
  (what crosses between them: data in a closed format, never a pickle), :mod:`.unseen` (a case
  drawn for each check), :mod:`.tamper` (what the learner's code must leave alone in one
  process), :mod:`.census_gates` (the census and its gates), :mod:`.launched` (the kernel a
  launch step launched, found without running the learner's code), :mod:`.widening` (the
  operations that made float64), :mod:`.show` (``verdict.show()``), :mod:`.learner_time` and
  :mod:`.timed` (``verdict.time()``), :mod:`.kernel_census` (the PTX census of a learner's
  kernel) and :mod:`.verify` (``--verify``).

The names notebooks use are re-exported here, so ``from ropelab import course`` and
``course.trace_threads(...)`` keep working.
"""

from . import exercises
from .checks import Check, check
from .display import excerpt, source
from .model_plots import plot_layer_times, plot_loss_curves
from .specialise import specialised
from .primer import (paper_budget, plot_compile_pipeline, plot_execution_model,
                     sectors_touched)
from .plots import (plot_all_variants, plot_freq_drift, plot_fused_map, plot_launch_overhead,
                    plot_precision, plot_roof, plot_sincos_error, plot_thread_map)
from .tables import (COPY_ROWS, bench_row, bench_table, case_label, copy_table, drift_table,
                     live_bench, noise_table, precision_table, provenance, public_path_table,
                     public_vs_kernel, recorded,
                     recorded_runs, relative_times, repeat_gaps, roof_gbps, run_to_run,
                     share_of_roof, sincos_table, spread)
from .tracing import FusedMap, ThreadMap, trace_fused, trace_threads

__all__ = [
    "public_path_table",
    "public_vs_kernel",
    "bench_row", "bench_table", "case_label", "check", "Check", "COPY_ROWS", "copy_table",
    "drift_table", "excerpt", "exercises", "FusedMap", "live_bench", "noise_table",
    "paper_budget", "plot_all_variants", "plot_compile_pipeline", "plot_execution_model",
    "plot_freq_drift", "plot_fused_map", "plot_launch_overhead", "plot_layer_times",
    "plot_loss_curves", "plot_precision", "plot_roof",
    "plot_sincos_error", "plot_thread_map", "precision_table", "provenance", "recorded",
    "recorded_runs", "relative_times", "repeat_gaps", "roof_gbps", "run_to_run",
    "sectors_touched", "share_of_roof", "sincos_table", "source", "specialised", "spread",
    "ThreadMap",
    "trace_fused", "trace_threads",
]
