// --dry-run previews and replay reporting of the spending commands; see cli_spend.h.
#include "client/cli/cli_spend.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/util/json_util.h"

namespace fairvault::client::cli {
namespace {

// One-line JSON of a message (proto field names, defaults included).
std::string CompactJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(message, &json, options).ok()) return "null";
  return json;
}

std::string BudgetLine(const v1::Budget& b) {
  return absl::StrCat("spent ", Num(b.epsilon_spent()), " of ", Num(b.epsilon_granted()),
                      ", remaining ", Num(b.epsilon_remaining()), " (releases: ", b.releases(),
                      ")");
}

// The status code named `name` ("RESOURCE_EXHAUSTED"); RESOURCE_EXHAUSTED when unknown.
absl::StatusCode CodeNamed(const std::string& name) {
  for (int code = 1; code <= 16; ++code) {
    if (absl::StatusCodeToString(static_cast<absl::StatusCode>(code)) == name) {
      return static_cast<absl::StatusCode>(code);
    }
  }
  return absl::StatusCode::kResourceExhausted;
}

// The vault's budget on `dataset` now, or nullopt when it cannot be read.
std::optional<v1::Budget> BudgetNow(Context& ctx, const std::string& dataset) {
  absl::StatusOr<Client*> client = ctx.client();
  if (!client.ok() || dataset.empty()) return std::nullopt;
  v1::GetBudgetRequest req;
  req.set_dataset(dataset);
  absl::StatusOr<v1::GetBudgetResponse> resp = (*client)->GetBudget(req);
  if (!resp.ok()) return std::nullopt;
  for (const v1::Budget& b : resp->budgets()) {
    if (b.dataset() == dataset && !b.company().empty()) return b;
  }
  if (resp->budgets_size() == 1) return resp->budgets(0);
  return std::nullopt;
}

}  // namespace

FlagSpec DryRunFlag() {
  return {"dry-run", "",
          "price the request without sending it for release: what it would charge, how noisy "
          "it would be, whether it would be admitted (exit 3 if it would be refused for "
          "budget); charges and stores nothing"};
}

std::string FormatPreview(const v1::PreviewReleaseResponse& p) {
  std::string out =
      "dry run: priced by the vault; nothing was charged, stored or written to the ledger\n";
  absl::StrAppend(&out, "would charge: ", FormatCost(p.cost()));
  if (p.rows() == 0 && p.groups() == 0) {
    // No sizes: a replay (priced from the stored release) or a decision licence.
  } else if (p.groups() > 0) {
    absl::StrAppend(&out, "rows: ", p.rows(), " in ", p.groups(), " groups (",
                    Num(static_cast<double>(p.rows()) / static_cast<double>(p.groups())),
                    " rows in an average group)\n");
  } else {
    absl::StrAppend(&out, "rows: ", p.rows(), "\n");
  }
  if (!p.accuracy().empty()) {
    absl::StrAppend(&out, "noise on each released count (95%: |noise| <= half-width):\n");
    TextTable table({"  PART", "MECHANISM", "NOISE_SCALE", "HALF_WIDTH_95", "VS_AVERAGE_GROUP"});
    for (const v1::NoiseAccuracy& a : p.accuracy()) {
      table.AddRow({absl::StrCat("  ", a.name().empty() ? "-" : a.name()), a.mechanism(),
                    Num(a.noise_scale()), absl::StrCat("±", a.half_width_95()),
                    p.rows() > 0 ? absl::StrFormat("%.4f", a.relative_to_average_group()) : "-"});
    }
    absl::StrAppend(&out, table.Render(),
                    "  (VS_AVERAGE_GROUP: the half-width over the rows of an average group, about\n"
                    "  how far a group's rate or mean moves from the noise; smaller groups move "
                    "more)\n");
  }
  const v1::Budget& now = p.budget_now();
  const v1::Budget& after = p.budget_after();
  if (p.has_budget_now()) {
    absl::StrAppend(&out, "budget on '", now.dataset(), "': remaining ",
                    Num(now.epsilon_remaining()), " of ", Num(now.epsilon_granted()), " now",
                    p.admitted() && p.replay_of_ledger_seq() == 0
                        ? absl::StrCat(" -> ", Num(after.epsilon_remaining()), " after")
                        : "",
                    now.delta() > 0 ? absl::StrCat(" (delta ", Num(now.delta()), ")") : "", "\n");
  }
  if (p.replay_of_ledger_seq() > 0) {
    absl::StrAppend(&out, "replay: already paid at ledger seq ", p.replay_of_ledger_seq(),
                    "; sending it charges nothing (it returns the stored release; for decide: "
                    "the artifact's licence is paid)\n");
  } else if (p.admitted()) {
    absl::StrAppend(&out,
                    "would be admitted now: yes (a preview reserves nothing: another release "
                    "may spend the budget first)\n");
  } else {
    absl::StrAppend(&out, "would be admitted now: NO: ",
                    p.refusal_code().empty() ? "" : absl::StrCat(p.refusal_code(), ": "),
                    p.refusal(), "\n");
  }
  return out;
}

absl::Status RunPreview(Context& ctx, const v1::PreviewReleaseRequest& req,
                        absl::string_view note) {
  absl::StatusOr<Client*> client = ctx.client();
  if (!client.ok()) return client.status();
  absl::StatusOr<v1::PreviewReleaseResponse> preview = (*client)->PreviewRelease(req);
  if (!preview.ok()) return preview.status();
  if (ctx.json()) {
    PrintJson(*preview);
  } else {
    std::cout << FormatPreview(*preview) << note;
  }
  if (preview->admitted() || preview->replay_of_ledger_seq() > 0) return absl::OkStatus();
  // The vault's refusal, marked as the vault's so that it exits by its class.
  return FromGrpcStatus(grpc::Status(
      static_cast<grpc::StatusCode>(CodeNamed(preview->refusal_code())),
      absl::StrCat(preview->refusal(), " (dry run: the vault would refuse this request)")));
}

std::string ReplayNote(int64_t seq, const std::optional<v1::Budget>& now) {
  std::string out = absl::StrCat("stored release from ledger seq ", seq,
                                 ", not charged again; balance shown is as of then\n");
  if (now.has_value()) {
    absl::StrAppend(&out, "budget now on '", now->dataset(), "': ", BudgetLine(*now), "\n");
  }
  return out;
}

std::string WithLeadingJsonFields(const std::string& json, const std::string& fields) {
  const size_t open = json.find('{');
  if (open == std::string::npos) return json;
  const size_t next = json.find_first_not_of(" \t\r\n", open + 1);
  const bool empty = next != std::string::npos && json[next] == '}';
  return absl::StrCat(json.substr(0, open + 1), "\n  ", fields, empty ? "" : ",",
                      json.substr(open + 1));
}

absl::Status WriteSpendingOutput(const std::string& path, absl::string_view content,
                                 const std::string& key) {
  absl::Status written = WriteStringToFile(path, content);
  if (written.ok() || key.empty()) return written;
  return absl::Status(
      written.code(),
      absl::StrCat(written.message(),
                   "; the call itself succeeded and its outcome is stored: repeat the command "
                   "with --idempotency-key ",
                   key, " and a writable --out to get it again without a second charge"));
}

void PrintSpending(Context& ctx, const google::protobuf::Message& resp, const v1::Charge& charge,
                   const CallInfo& info, const std::string& text) {
  const int64_t seq = info.replayed_ledger_seq;
  std::optional<v1::Budget> now;
  if (seq > 0) now = BudgetNow(ctx, charge.budget_after().dataset());
  if (ctx.json()) {
    std::string fields = absl::StrCat("\"replayed\": ", seq > 0 ? "true" : "false",
                                      ",\n  \"replayed_ledger_seq\": ", seq);
    if (now.has_value()) absl::StrAppend(&fields, ",\n  \"budget_now\": ", CompactJson(*now));
    std::cout << WithLeadingJsonFields(ToJson(resp), fields);
    return;
  }
  std::cout << text;
  if (seq > 0) {
    std::cout.flush();
    std::cerr << ReplayNote(seq, now);
  }
}

}  // namespace fairvault::client::cli
