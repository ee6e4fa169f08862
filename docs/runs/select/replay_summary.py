"""What the replay scripts of this folder print per set of judged problems (``fit_selector.judge``'s
results): pick / best by class, how many reach 0.90 of the best, the picks more than 2 % slower
than the default, torch / pick."""
import collections
import math
import sys

sys.path.insert(0, "benchmarks")
import fit_selector as fs  # noqa: E402
from autokernel.report import problem_class  # noqa: E402
from autokernel.tuning.shapes import Problem  # noqa: E402


def geomean(values):
    values = list(values)
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def class_of(key):
    """``report.problem_class`` of a judged problem's key (``fit_selector.shape_key``)."""
    return problem_class(Problem(key[0], key[1], key[2], key[3], key[5], key[6], key[4]))


def summary(results):
    results = [r for r in results if r]
    cls = {r[0]: class_of(r[0]) for r in results}
    by = " ".join(f"{c} {geomean(r[1] for r in results if cls[r[0]] == c):.4f}"
                  for c in ("decode", "skinny", "mid", "large") if any(cls[r[0]] == c for r in results))
    return (f"pick / best {geomean(r[1] for r in results):.4f} ({by}), >= 0.90 on "
            f"{sum(r[1] >= 0.9 for r in results)} of {len(results)}, > 2 % slower than the default "
            f"{sum(r[2] < 0.98 for r in results)}, torch / pick {geomean(r[3] for r in results):.4f}")


def by_shape(rows):
    out = collections.defaultdict(list)
    for row in rows:
        out[fs.shape_key(row)].append(row)
    return out
