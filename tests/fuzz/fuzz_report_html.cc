// Fuzzes the HTML/SVG report renderers (client/report) with names, labels and numbers chosen
// by others: group and attribute names, provenance, series, ledger rows, access-log rows, and
// sweeps read from CSV. Every string the fuzzer makes carries the markers <x-fuzz, "x-fuzz and
// 'x-fuzz around its fuzzed parts; a page is well-formed for our purpose when none of them
// appears unescaped (no element, attribute or script can come from a name) and the page is
// one <html> document. A refusal is an InvalidArgument (a non-finite number, an empty sweep).
#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/lib/csv.h"
#include "client/report/report_budgets_html.h"
#include "client/report/report_html.h"
#include "tests/fuzz/fuzz_contract.h"

namespace {

using fairvault::fuzz::Fail;

using namespace fairvault::client;
using namespace fairvault::client::report;

std::string Hostile(FuzzedDataProvider& in) {
  return absl::StrCat(in.ConsumeRandomLengthString(24), "<x-fuzz", in.ConsumeRandomLengthString(24),
                      "\"x-fuzz", in.ConsumeRandomLengthString(24), "'x-fuzz");
}

double Number(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0:
      return in.ConsumeFloatingPoint<double>();
    case 1:
      return std::nan("");
    case 2:
      return HUGE_VAL;
    default:
      return in.ConsumeFloatingPointInRange<double>(-2, 2);
  }
}

Estimate MakeEstimate(FuzzedDataProvider& in) { return {Number(in), Number(in), Number(in)}; }

Provenance MakeProvenance(FuzzedDataProvider& in) {
  Provenance p;
  for (int i = in.ConsumeIntegralInRange<int>(0, 3); i > 0; --i) p.emplace_back(Hostile(in), Hostile(in));
  return p;
}

void Check(const absl::StatusOr<std::string>& page, const char* which) {
  if (!page.ok()) {
    if (page.status().code() != absl::StatusCode::kInvalidArgument) {
      Fail(which, page.status().ToString());
    }
    return;
  }
  for (const char* marker : {"<x-fuzz", "\"x-fuzz", "'x-fuzz"}) {
    if (absl::StrContains(*page, marker)) Fail(which, absl::StrCat("unescaped ", marker));
  }
  if (!absl::StartsWith(*page, "<!DOCTYPE html>") || !absl::StrContains(*page, "</html>")) {
    Fail(which, "not one html document");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  switch (in.ConsumeIntegralInRange<int>(0, 4)) {
    case 0: {
      ClassifierAudit audit;
      audit.dataset = Hostile(in);
      for (int i = in.ConsumeIntegralInRange<int>(0, 3); i > 0; --i) {
        audit.attributes.push_back(Hostile(in));
      }
      for (int i = in.ConsumeIntegralInRange<int>(0, 6); i > 0; --i) {
        audit.groups.push_back({Hostile(in), MakeEstimate(in), MakeEstimate(in), MakeEstimate(in),
                                MakeEstimate(in), in.ConsumeIntegral<int64_t>(), in.ConsumeBool()});
      }
      audit.demographic_parity_violation = MakeEstimate(in);
      audit.equalized_odds_violation = MakeEstimate(in);
      if (in.ConsumeBool()) audit.tpr_difference = MakeEstimate(in);
      audit.provenance = MakeProvenance(in);
      audit.confidence = Number(in);
      audit.epsilon = Number(in);
      audit.m = in.ConsumeIntegral<int64_t>();
      audit.small_group_threshold = Number(in);
      Check(RenderClassifierAuditHtml(audit), "classifier audit");
      break;
    }
    case 1: {
      RegressorAudit audit;
      audit.dataset = Hostile(in);
      audit.attributes.push_back(Hostile(in));
      audit.bins = in.ConsumeIntegralInRange<int>(0, 40);
      for (int i = in.ConsumeIntegralInRange<int>(0, 5); i > 0; --i) {
        RegressorGroup g{Hostile(in), MakeEstimate(in), {}, in.ConsumeIntegral<int64_t>(),
                         in.ConsumeBool()};
        for (int b = in.ConsumeIntegralInRange<int>(0, 40); b > 0; --b) g.histogram.push_back(Number(in));
        audit.groups.push_back(std::move(g));
      }
      audit.max_ks = MakeEstimate(in);
      audit.confidence = Number(in);
      audit.epsilon = Number(in);
      audit.lo = Number(in);
      audit.hi = Number(in);
      audit.provenance = MakeProvenance(in);
      Check(RenderRegressorAuditHtml(audit), "regressor audit");
      break;
    }
    case 2: {
      Sweep sweep;
      sweep.title = Hostile(in);
      sweep.x_label = Hostile(in);
      sweep.y_label = Hostile(in);
      sweep.log_x = in.ConsumeBool();
      sweep.facets = static_cast<SweepFacets>(in.ConsumeIntegralInRange<int>(0, 2));
      for (int i = in.ConsumeIntegralInRange<int>(0, 12); i > 0; --i) {
        SweepPoint p{in.ConsumeBool() ? Hostile(in) : "", Number(in), Number(in), Number(in)};
        if (in.ConsumeBool()) p.error_ci = Range{Number(in), Number(in)};
        if (in.ConsumeBool()) p.violation_ci = Range{Number(in), Number(in)};
        if (in.ConsumeBool()) p.cost_epsilon = Number(in);
        (in.ConsumeIntegralInRange<int>(0, 4) == 0 ? sweep.baselines : sweep.points).push_back(p);
      }
      sweep.provenance = MakeProvenance(in);
      Check(RenderSweepHtml(sweep), "sweep");
      break;
    }
    case 3: {
      // A sweep as `report sweep` reads it: CSV whose cells are the fuzzer's, with the markers.
      std::vector<std::string> header = {"epsilon", "error", "violation", "series"};
      std::vector<std::vector<std::string>> rows;
      for (int i = in.ConsumeIntegralInRange<int>(0, 8); i > 0; --i) {
        rows.push_back({in.ConsumeRandomLengthString(12), in.ConsumeRandomLengthString(12),
                        in.ConsumeRandomLengthString(12), Hostile(in)});
      }
      absl::StatusOr<CsvTable> table = ParseCsv(FormatCsv(header, rows), "sweep.csv");
      if (!table.ok()) break;
      absl::StatusOr<Sweep> sweep = SweepFromCsv(*table, "sweep.csv");
      if (!sweep.ok()) break;
      Check(RenderSweepHtml(*sweep), "sweep from csv");
      break;
    }
    default: {
      BudgetsReport report;
      report.title = Hostile(in);
      report.server = Hostile(in);
      report.filters = Hostile(in);
      for (int i = in.ConsumeIntegralInRange<int>(0, 10); i > 0; --i) {
        LedgerRow row;
        row.seq = i;
        row.time_unix_micros = in.ConsumeIntegralInRange<int64_t>(0, int64_t{4} << 50);
        row.kind = in.PickValueInArray({"grant", "cap", "charge"});
        row.account = Hostile(in);
        row.dataset = in.ConsumeBool() ? "d" : Hostile(in);
        row.request_kind = Hostile(in);
        row.epsilon = Number(in);
        row.delta = Number(in);
        row.mechanism = Hostile(in);
        row.idempotency_key = Hostile(in);
        row.actor = Hostile(in);
        row.artifact_id = Hostile(in);
        if (in.ConsumeBool()) row.composed_after = Number(in);
        report.ledger.push_back(std::move(row));
      }
      for (int i = in.ConsumeIntegralInRange<int>(0, 3); i > 0; --i) {
        report.budgets.push_back({Hostile(in), Hostile(in), Number(in), Number(in), Number(in),
                                  Number(in), in.ConsumeIntegral<int64_t>()});
      }
      report.verification = {in.ConsumeBool(), 0, 0, Hostile(in), Hostile(in)};
      report.checkpoint.present = in.ConsumeBool();
      report.checkpoint.root_hex = Hostile(in);
      report.checkpoint.origin = Hostile(in);
      report.checkpoint.note = Hostile(in);
      report.checkpoint.witnesses = Hostile(in);
      report.access_log.push_back({in.ConsumeIntegral<int64_t>(), Hostile(in), Hostile(in),
                                   Hostile(in), in.ConsumeIntegral<int64_t>(), -1});
      Check(RenderBudgetsHtml(report), "budgets");
      // The CSV of charges neutralises formulas: no cell starts with = + - @.
      (void)ChargesCsv(report);
      break;
    }
  }
  return 0;
}
