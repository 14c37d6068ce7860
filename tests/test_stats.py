import math

from verifier import stats
from verifier.attribution.numerics import event_verdict, metric_verdict
from verifier.attribution.signals import degenerate


def test_wilson_known_values():
    lo, hi = stats.wilson(0, 20)
    assert lo == 0 and math.isclose(hi, 0.1611, abs_tol=1e-4)
    lo, hi = stats.wilson(20, 20)
    assert hi == 1 and math.isclose(lo, 0.8389, abs_tol=1e-4)


def test_mcnemar_exact():
    assert stats.mcnemar_exact(0, 0) == 1.0
    assert math.isclose(stats.mcnemar_exact(6, 0), 2 * 0.5**6)
    assert math.isclose(stats.mcnemar_exact(3, 3), 1.0)
    assert stats.mcnemar_exact(10, 1) < 0.05


def test_paired_bootstrap_is_seeded_and_brackets_delta():
    g = [1] * 10 + [0] * 10
    c = [1] * 5 + [0] * 15
    a = stats.paired_bootstrap(g, c, seed=3)
    assert a == stats.paired_bootstrap(g, c, seed=3)
    assert a[0] < -0.25 < a[1] < 0


def test_metric_verdicts():
    same = metric_verdict([1, 0, 1, 1], [1, 0, 1, 1], 0.0)
    assert same.verdict == "pass" and same.delta == 0
    worse = metric_verdict([1] * 20, [0] * 12 + [1] * 8, 0.0)
    assert worse.verdict == "fail" and worse.p_value < 0.001
    one_flip = metric_verdict([1] * 20, [0] + [1] * 19, 0.0)
    assert one_flip.verdict == "inconclusive"
    within_margin = metric_verdict([1] * 20, [0] + [1] * 19, 0.2)
    assert within_margin.verdict == "pass"


def test_event_verdicts():
    assert event_verdict(0, 20, 0.0).verdict == "pass"
    assert event_verdict(1, 20, 0.0).verdict == "fail"
    assert event_verdict(2, 20, 0.05).verdict == "inconclusive"


def test_degenerate_repetition():
    assert degenerate("The answer is " + "foss " * 30)
    assert not degenerate("The answer is 42 because 40 plus 2 makes 42, as shown above in detail.")


def test_wilson_bounds_are_exact_at_the_edges_for_every_n():
    for n in range(1, 200):
        assert stats.wilson(0, n)[0] == 0.0 and stats.wilson(n, n)[1] == 1.0
        assert event_verdict(0, n, 0.0).verdict == "pass"
