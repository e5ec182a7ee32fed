"""The grader of the course's ladders: a learner's function judged against a step.

A notebook grades with::

    from ropelab.grader import steps
    verdict = steps.check(my_kernel, "01.2")     # verdict.show(), verdict.time()
    steps.hint("01.2")                           # a direction, the structure, the key line
    steps.progress()                             # the steps this learner has passed

One module per concern:

* :mod:`.steps`: every notebook's ladder of graded steps (the contracts, cases and rules);
  :mod:`.hints` (three levels per step), :mod:`.coach` and :mod:`.progress` (the learner's
  side of a verdict), :mod:`.starters` (empty body or skeleton);
* :mod:`.grading` (the judging) and :mod:`.grade_types` (case, verdict); :mod:`.intake` (what
  was handed in); :mod:`.trial`, :mod:`.recording` and :mod:`.launch_records` (one recorded
  run; launches intercepted); :mod:`.judging` (what a run's records say beyond its values:
  ownership, launch rules, host-side work);
* :mod:`.runner` and :mod:`.child` (the learner's code in a forked child with a time limit,
  the judging in the parent); :mod:`.wire` and :mod:`.carried` (what crosses between them: data
  in a closed format, never a pickle); :mod:`.unseen` (a case drawn for each check);
  :mod:`.tamper` (what the learner's code must leave alone in one process);
* :mod:`.census_gates` (the census and its gates), :mod:`.kernel_census` (the PTX census of a
  learner's kernel), :mod:`.launched` (the kernel a launch step launched, found without running
  the learner's code), :mod:`.widening` (the operations that made float64);
* :mod:`.show` (``verdict.show()``), :mod:`.learner_time` and :mod:`.timed`
  (``verdict.time()``);
* :mod:`.verify` (``python -m ropelab exercises --verify``) and :mod:`.heldout` (the
  independent learners' kernels and probes, ``--heldout``).
"""
