"""private_metric_frame: every number is the audit release's (or arithmetic on its counts), the
intervals are the response's, and at large epsilon the values are the population's rates."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import fairvault  # noqa: E402
from fairvault import errors  # noqa: E402
from fairness_population import DATASET, fair_company, population  # noqa: E402,F401 (fixtures)

FIELDS = {"selection_rate": "selection_rate", "true_positive_rate": "tpr",
          "false_positive_rate": "fpr", "error_rate": "error"}



def test_values_are_the_audit_responses(population, fair_company) -> None:
    df = population
    frame = fairvault.private_metric_frame(fair_company, df, "label", "prediction", 1.0,
                                           dataset=DATASET, key_column="key",
                                           attributes=["sex"])
    report = frame.response.report
    assert list(frame.by_group.index) == [g.group for g in report.groups] == ["F", "M"]
    assert frame.by_group.index.name == "sex"
    for g in report.groups:
        row = frame.by_group.loc[g.group]
        for metric, field in FIELDS.items():
            interval = getattr(g, field)
            assert (row[metric], row[metric + "_lo"], row[metric + "_hi"]) == \
                (interval.estimate, interval.lo, interval.hi)
        assert (row.accuracy, row.accuracy_lo, row.accuracy_hi) == \
            (1 - g.error.estimate, 1 - g.error.hi, 1 - g.error.lo)
        assert (row.n_pred1_label0, row.noisy_rows, row.small_group) == \
            (g.noisy_pred1_label0, g.noisy_rows, g.small_group)
    # The violations: max - min of the released estimates, with the released intervals.
    diff = frame.difference(intervals=True)
    dp, eo = report.demographic_parity_violation, report.equalized_odds_violation
    assert diff.loc["selection_rate", "difference"] == pytest.approx(dp.estimate, abs=1e-12)
    assert (diff.loc["selection_rate", "lo"], diff.loc["selection_rate", "hi"]) == (dp.lo, dp.hi)
    assert tuple(diff.loc["equalized_odds"]) == (eo.estimate, eo.lo, eo.hi)
    assert eo.estimate == pytest.approx(max(diff.loc["true_positive_rate", "difference"],
                                            diff.loc["false_positive_rate", "difference"]),
                                        abs=1e-12)
    assert np.isnan(diff.loc["accuracy", "lo"])  # no interval released for it
    assert frame.difference().equals(diff.difference.drop("equalized_odds"))
    ratio = frame.ratio()
    assert ratio["selection_rate"] == pytest.approx(
        frame.by_group.selection_rate.min() / frame.by_group.selection_rate.max())
    # The TPR and FPR differences have their own released intervals (equalized odds is the
    # larger of the two, interval and all).
    tpr, fpr = report.tpr_difference, report.fpr_difference
    assert (diff.loc["true_positive_rate", "lo"], diff.loc["true_positive_rate", "hi"]) == \
        (tpr.lo, tpr.hi)
    assert (diff.loc["false_positive_rate", "lo"], diff.loc["false_positive_rate", "hi"]) == \
        (fpr.lo, fpr.hi)
    assert (eo.lo, eo.hi) == (max(tpr.lo, fpr.lo), max(tpr.hi, fpr.hi))
    # Overall: every row was used, so the caller's own rows' exact rates, with Clopper-Pearson
    # intervals (the caller's data: nothing released).
    assert frame.overall_source.startswith("exact")
    assert frame.overall["selection_rate"] == pytest.approx(df.prediction.mean(), abs=1e-12)
    assert frame.overall["accuracy"] == pytest.approx((df.prediction == df.label).mean(),
                                                      abs=1e-12)
    positives = df[df.label == 1]
    lo, hi = fairvault.metric_frame.clopper_pearson(int(positives.prediction.sum()),
                                                    len(positives), 0.95)
    assert tuple(frame.overall_intervals.loc["true_positive_rate", ["lo", "hi"]]) == (lo, hi)
    assert lo < frame.overall["true_positive_rate"] < hi
    assert frame.charge.cost.epsilon == pytest.approx(1.0) and frame.epsilon == 1.0
    assert frame.confidence == 0.95 and frame.rows == len(df)


def test_large_epsilon_gives_the_populations_rates(population, fair_company) -> None:
    df = population
    frame = fairvault.private_metric_frame(fair_company, df, df.label.to_numpy(),
                                           df.prediction.to_numpy(), 200.0, dataset=DATASET,
                                           key_column="key", confidence=0.9)
    assert frame.confidence == pytest.approx(0.9)
    for sex, row in frame.by_group.iterrows():
        g = df[df.sex == sex]
        truth = {"selection_rate": g.prediction.mean(),
                 "true_positive_rate": g.prediction[g.label == 1].mean(),
                 "false_positive_rate": g.prediction[g.label == 0].mean(),
                 "accuracy": (g.prediction == g.label).mean()}
        for metric, value in truth.items():
            # Discrete Laplace at t = 2/200: every count exact with probability > 1 - 1e-40.
            assert row[metric] == pytest.approx(value, abs=1e-12)
            assert row[metric + "_lo"] <= value <= row[metric + "_hi"]
    assert frame.overall["accuracy"] == pytest.approx((df.prediction == df.label).mean())


def test_a_table_handle_and_small_epsilon(population, fair_company) -> None:
    df = population.head(3000)
    table = fair_company.upload_table(df, DATASET, "key", numeric=["label", "prediction"])
    frame = fairvault.private_metric_frame(fair_company, table, "label", "prediction", 0.05)
    assert frame.table_ == table
    widths = frame.by_group.true_positive_rate_hi - frame.by_group.true_positive_rate_lo
    assert (widths > 0.02).all()  # noise at epsilon 0.05 shows in the intervals
    # From a table handle the client has no rows: overall is the summed clamped noisy counts,
    # with no interval.
    counts = {c: np.maximum(frame.by_group[f"n_{c}"], 0).sum()
              for c in ("pred0_label0", "pred0_label1", "pred1_label0", "pred1_label1")}
    total = sum(counts.values())
    assert frame.overall["selection_rate"] == pytest.approx(
        (counts["pred1_label0"] + counts["pred1_label1"]) / total)
    assert frame.overall["true_positive_rate"] == pytest.approx(
        counts["pred1_label1"] / (counts["pred1_label1"] + counts["pred0_label1"]))
    assert frame.overall_intervals.lo.isna().all() and "noisy" in frame.overall_source
    for metric in ("selection_rate", "accuracy"):
        assert (frame.by_group[metric + "_lo"] <= frame.by_group[metric]).all()
        assert (frame.by_group[metric] <= frame.by_group[metric + "_hi"]).all()
    with pytest.raises(ValueError, match="dataset="):
        fairvault.private_metric_frame(fair_company, df, "label", "prediction", 1.0,
                                       key_column="key")


def test_joint_groups_and_differences_to_overall(company, table) -> None:
    frame = fairvault.private_metric_frame(company, table, "label", "prediction", 2.0)
    assert frame.by_group.index.name == "sex|race"
    assert list(frame.by_group.index) == [f"{s}|{r}" for s in "FM" for r in "ABC"]
    metrics = frame.by_group[["selection_rate", "accuracy"]]
    to_overall = frame.difference(method="to_overall")
    assert to_overall["selection_rate"] == pytest.approx(
        (metrics.selection_rate - frame.overall["selection_rate"]).abs().max())
    ratio = frame.ratio(method="to_overall")["accuracy"]
    assert ratio == pytest.approx(min(min(a / frame.overall["accuracy"],
                                          frame.overall["accuracy"] / a)
                                      for a in metrics.accuracy))
    with pytest.raises(ValueError, match="between-group differences only"):
        frame.difference(method="to_overall", intervals=True)
    with pytest.raises(ValueError, match="method must be"):
        frame.ratio(method="largest")


def test_plot_draws_each_group_with_its_interval(population, fair_company, tmp_path) -> None:
    frame = fairvault.private_metric_frame(fair_company, population.head(4000), "label",
                                           "prediction", 2.0, dataset=DATASET,
                                           key_column="key")
    ax = frame.plot()
    bars = [c for c in ax.containers if isinstance(c, matplotlib.container.BarContainer)]
    assert len(bars) == 2  # one per group
    heights = [[p.get_height() for p in c.patches] for c in bars]
    assert heights[0][0] == frame.by_group.selection_rate.iloc[0]
    assert heights[1][3] == frame.by_group.accuracy.iloc[1]
    errorbars = [c for c in ax.containers if isinstance(c, matplotlib.container.ErrorbarContainer)]
    segments = errorbars[0].lines[2][0].get_segments()
    lo, hi = segments[0][0][1], segments[0][1][1]
    assert (lo, hi) == pytest.approx((frame.by_group.selection_rate_lo.iloc[0],
                                      frame.by_group.selection_rate_hi.iloc[0]))
    ax.figure.savefig(tmp_path / "frame.png")
    assert (tmp_path / "frame.png").stat().st_size > 1000


def test_preview_prices_the_audit(population, fair_company) -> None:
    budget = fair_company.get_budget(DATASET).epsilon_remaining[0]
    try:
        price = fairvault.private_metric_frame(fair_company, population.head(2000), "label",
                                               "prediction", 0.7, dataset=DATASET,
                                               key_column="key", preview=True)
    except errors.FairvaultError as error:
        if error.code.name == "UNIMPLEMENTED":
            pytest.skip("this server has no PreviewRelease yet")
        raise
    assert isinstance(price, fairvault.Preview) and price.cost.epsilon == pytest.approx(0.7)
    assert fair_company.get_budget(DATASET).epsilon_remaining[0] == budget


def test_metrics_by_name_cost_the_same_one_release(population, fair_company) -> None:
    df = population.head(4000)
    charges = (fair_company.list_ledger().kind == "charge").sum()
    with pytest.raises(errors.InvalidInput, match="unknown \\['roc_auc'\\]"):
        fairvault.private_metric_frame(fair_company, df, "label", "prediction", 1.0,
                                       dataset=DATASET, key_column="key",
                                       metrics=["precision", "roc_auc"])
    assert (fair_company.list_ledger().kind == "charge").sum() == charges  # refused first
    frame = fairvault.private_metric_frame(
        fair_company, df, "label", "prediction", 1.0, dataset=DATASET, key_column="key",
        metrics=["precision_score", "recall", "false_negative_rate", "base_rate"])
    assert frame.metric_names == ("precision", "true_positive_rate", "false_negative_rate",
                                  "base_rate")
    assert list(frame.metrics.columns) == list(frame.metric_names)
    for g in frame.response.report.groups:
        row = frame.by_group.loc[g.group]
        tp, fp = max(g.noisy_pred1_label1, 0), max(g.noisy_pred1_label0, 0)
        assert row.precision == pytest.approx(tp / max(tp + fp, 1))
        assert np.isnan(row.precision_lo)  # no interval is released for precision
        # The FNR's interval is exactly the complement of the released TPR's.
        assert (row.false_negative_rate, row.false_negative_rate_lo,
                row.false_negative_rate_hi) == (1 - g.tpr.estimate, 1 - g.tpr.hi, 1 - g.tpr.lo)
    assert frame.overall["base_rate"] == pytest.approx(df.label.mean(), abs=1e-12)
    assert (fair_company.list_ledger().kind == "charge").sum() == charges + 1


def test_clopper_pearson_matches_its_closed_forms() -> None:
    cp = fairvault.metric_frame.clopper_pearson
    # 0 or n successes have closed forms: (alpha/2)^(1/n).
    assert cp(0, 10, 0.95) == pytest.approx((0.0, 1 - 0.025 ** 0.1), abs=1e-9)
    assert cp(10, 10, 0.95) == pytest.approx((0.025 ** 0.1, 1.0), abs=1e-9)
    # A textbook value: 5 of 10 at 95 %: [0.1871, 0.8129].
    lo, hi = cp(5, 10, 0.95)
    assert (round(lo, 4), round(hi, 4)) == (0.1871, 0.8129)
    assert cp(0, 0) == (0.0, 1.0)
