"""``python -m ropelab.measure.predict [--record]``: print the fit (and write data/predict/)."""

import argparse
import sys

from .record import compute, format_report, save


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ropelab.measure.predict",
                                     description="fit the predicted-H200-time model on the "
                                     "records and report its out-of-sample error")
    parser.add_argument("--record", action="store_true", help="write data/predict/")
    args = parser.parse_args(argv)
    doc = compute()
    print(format_report(doc))
    if args.record:
        print(f"wrote {save(doc)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
