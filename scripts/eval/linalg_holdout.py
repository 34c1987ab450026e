"""Left-one-out error of the linalg time table (predict/linalg_time.py): each measured (n, matrices) point of each
torch.linalg op predicted from the op's other points, as an unmeasured size would be.

    PYTHONPATH=src python3 scripts/eval/linalg_holdout.py [src/kernelcast/profiles/h200.json]

Points at the ends of a batch's sizes are extrapolated (above the largest at the last two sizes' slope, flat below
the smallest), so they are reported apart from the interior ones."""

import json
import statistics
import sys

from kernelcast.predict.linalg_time import linalg_time_us


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else "src/kernelcast/profiles/h200.json"
    table = json.load(open(path))["timings"]["linalg"]
    print(f"{'op':30s} {'interior: median / worst |error|':>34s} {'ends: median / worst':>24s}")
    for op, rows in table.items():
        interior, ends = [], []
        for i, (n, batch, us) in enumerate(rows):
            rest = rows[:i] + rows[i + 1:]
            sizes = [r[0] for r in rest if r[1] == batch]
            predicted = linalg_time_us(rest, n, batch)
            if predicted is None or not sizes:
                continue
            error = abs(predicted - us) / us
            (interior if min(sizes) < n < max(sizes) else ends).append(error)

        def summary(errors):
            return f"{statistics.median(errors) * 100:5.1f}% / {max(errors) * 100:5.1f}%" if errors else "-"

        print(f"{op:30s} {summary(interior):>34s} {summary(ends):>24s}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
