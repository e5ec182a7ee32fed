"""``python -m ropelab.grader.predict``: the fit's report; ``--record`` writes data/predict/;
``--check-set DIR`` judges a held-out set by the recorded model."""

import argparse
import json
import sys

from . import record


def _progress(done, total):
    print(f"\r  compiled {done}/{total}", end="\n" if done == total else "", file=sys.stderr,
          flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ropelab.grader.predict",
                                     description="fit the predicted-H200-time model on the "
                                     "recorded timings and report its leave-one-family-out "
                                     "error")
    parser.add_argument("--record", action="store_true", help="write data/predict/")
    parser.add_argument("--check-set", metavar="DIR", help="a held-out set's learner_*.py "
                        "directory: its timed rows predicted by the recorded model")
    parser.add_argument("--timings", metavar="CSV", help="with --check-set: the GPU run's CSV "
                        "of that set (default: the newest data/predict/timings-<set>-*.csv)")
    parser.add_argument("--fit-timings", metavar="CSV", help="with --check-set: fit the "
                        "constants on this training CSV of the same GPU run instead of taking "
                        "the record's (a check on another GPU)")
    parser.add_argument("--save", metavar="JSON", help="with --check-set: write the result")
    parser.add_argument("--save-kernels", action="store_true", help="write data/predict/"
                        "kernels.json: the compiled kernels notebook 07 and the tests predict")
    args = parser.parse_args(argv)
    if not args.check_set:
        given = [f"--{n.replace('_', '-')}" for n in ("timings", "fit_timings", "save")
                 if getattr(args, n)]
        if given:
            parser.error(f"{', '.join(given)} only with --check-set")
    elif args.fit_timings and not args.timings:
        parser.error("--fit-timings needs --timings: the set's CSV of the same GPU run")
    if args.check_set:
        result = record.check_set(args.check_set, args.timings, progress=_progress,
                                  fit_csv=args.fit_timings)
        s = result["summary"]
        print(f"model: {result['model']}")
        print(f"{result['set']}: {s['rows']} rows predicted of {result['timed']} timed "
              f"({result['entries']} entries); model mean {100 * s['model_mean']:.1f}% worst "
              f"{100 * s['model_max']:.1f}%; trivial mean {100 * s['trivial_mean']:.1f}% worst "
              f"{100 * s['trivial_max']:.1f}%")
        for reg in result["registered"]:
            print(f"registered predictions {reg['file']} ({reg['header']}): {reg['rows']} rows, "
                  f"{reg['equal']} equal to this model's, {reg['inside_range']} measured "
                  "inside their 80% range")
        print("families where the model is worse than the trivial model: "
              + (", ".join(s["families_worse_than_trivial"]) or "none"))
        for line in sorted(result["rows"], key=lambda x: -abs(x["model_error"]))[:15]:
            print(f"  {line['key']:<28} {line['family']:<10} measured {line['measured_us']:8.1f}"
                  f"  model {line['model_us']:8.1f} ({100 * line['model_error']:+.1f}%)")
        if args.save:
            with open(args.save, "w") as fh:
                json.dump(result, fh, indent=1)
            print(f"wrote {args.save}")
        return 0
    if args.save_kernels:
        print(f"wrote {record.save_committed_kernels()}")
        return 0
    doc = record.compute(progress=_progress)
    print(record.format_report(doc))
    if args.record:
        print(f"wrote {record.save(doc)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
