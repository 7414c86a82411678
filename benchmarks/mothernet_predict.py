"""MotherNet's child MLP at prediction time, against the hypernetwork pass that writes it and against
HistGradientBoosting's predict on the same rows (targets: child >= 10x faster than the hypernetwork pass, and
at least as fast as gradient boosting's predict), side by side in one process.

On scikit-learn's bundled tables (breast_cancer, digits, wine), each split 50/50 (stratified, seeded): the
hypernetwork (default sizes; its weights do not change the cost) reads the training rows once (`fit`), the
child's forward runs on the test rows, and a HistGradientBoostingClassifier (100 iterations) fitted on the same
training rows predicts the same test rows. Both predictions are timed as users call them (``predict_proba``,
input checks included) and as bare forwards. Prints the median of ``--repeats`` timings per table and the ratios.

    python benchmarks/mothernet_predict.py [--repeats 20] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from sklearn.ensemble import HistGradientBoostingClassifier
from threadpoolctl import threadpool_limits

from components.tabular.benchmark import stratified_splits
from components.tabular.classifier import MotherNetClassifier
from components.tabular.mothernet import MotherNet, MotherNetConfig
from components.tabular.tables import SKLEARN_SETS, sklearn_table
from components.training import torch_threads

HYPER_RATIO, GBM_RATIO = 10.0, 1.0


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up: first-call allocations are not the method's cost
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="torch and scikit-learn threads")
    args = parser.parse_args()
    ok = True
    print(f"median of {args.repeats} calls, {args.threads} thread(s); times in ms")
    print(
        f"{'table':<14}{'rows':>6}{'hypernet fit':>14}{'child fwd':>11}{'child proba':>13}{'GBM proba':>11}"
        f"{'fit/fwd':>9}{'GBM/proba':>11}"
    )
    with torch_threads(args.threads), threadpool_limits(args.threads), torch.no_grad():
        for name in [n for n in SKLEARN_SETS if n != "iris"]:
            table = sklearn_table(name)
            train, test = stratified_splits(table.y, 1, 0.5, seed=0)[0]
            x_train, y_train, x_test = table.x[train], table.y[train], table.x[test]
            # an untrained hypernetwork of the default sizes: the costs measured do not depend on its weights
            classifier = MotherNetClassifier(MotherNet(MotherNetConfig(), seed=0)).fit(x_train, y_train)
            gbm = HistGradientBoostingClassifier(max_iter=100, early_stopping=False, random_state=0)
            gbm.fit(x_train, y_train)
            x = torch.from_numpy(x_test).float()
            fit_s = median_seconds(lambda: classifier.fit(x_train, y_train), args.repeats)
            child = classifier.child_
            forward_s = median_seconds(lambda: child(x), args.repeats)
            proba_s = median_seconds(lambda: classifier.predict_proba(x_test), args.repeats)
            gbm_s = median_seconds(lambda: gbm.predict_proba(x_test), args.repeats)
            hyper_ratio, gbm_ratio = fit_s / forward_s, gbm_s / proba_s
            ok &= hyper_ratio >= HYPER_RATIO and gbm_ratio >= GBM_RATIO
            print(
                f"{name:<14}{len(test):>6}{fit_s * 1e3:>14.2f}{forward_s * 1e3:>11.3f}{proba_s * 1e3:>13.3f}"
                f"{gbm_s * 1e3:>11.3f}{hyper_ratio:>8.1f}x{gbm_ratio:>10.1f}x"
            )
    print(
        f"targets: hypernetwork fit / child forward >= {HYPER_RATIO:g}x and GBM predict_proba / child predict_proba "
        f">= {GBM_RATIO:g}x on every table: {'meets' if ok else 'MISSES'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
