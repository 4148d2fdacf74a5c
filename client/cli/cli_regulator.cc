// Regulator commands: datasets, attribute import, accounts, grants and caps.
#include <cstdio>
#include <iostream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cli/cli_common.h"
#include "client/lib/pseudonymise.h"
#include "core/util/status_macros.h"

namespace fairvault::client::cli {
namespace {

std::string AttributesText(const v1::Dataset& d) {
  std::vector<std::string> parts;
  for (const v1::Attribute& a : d.attributes()) {
    parts.push_back(absl::StrCat(a.name(), "{", absl::StrJoin(a.categories(), ","), "}"));
  }
  return absl::StrJoin(parts, " ");
}

void PrintDatasets(const google::protobuf::RepeatedPtrField<v1::Dataset>& datasets) {
  if (datasets.empty()) {
    std::cout << "(no datasets)\n";
    return;
  }
  TextTable table({"NAME", "SUBJECTS", "CAP", "CREATED", "ATTRIBUTES"});
  for (const v1::Dataset& d : datasets) {
    const std::string cap = d.has_cap() ? absl::StrCat(Num(d.cap().epsilon_spent()), "/",
                                                       Num(d.cap().epsilon_granted()))
                                        : "-";
    table.AddRow({d.name(), absl::StrCat(d.subject_count()), cap,
                  FormatUnixSeconds(d.created_unix()), AttributesText(d)});
  }
  std::cout << table.Render();
}

// "sex=Female,Male" → Attribute.
absl::StatusOr<v1::Attribute> ParseAttribute(absl::string_view text) {
  const size_t eq = text.find('=');
  if (eq == absl::string_view::npos || eq == 0 || eq + 1 == text.size()) {
    return UsageError(
        absl::StrCat("--attribute must look like NAME=CAT1,CAT2,... (got '", text, "')"));
  }
  v1::Attribute attribute;
  attribute.set_name(std::string(absl::StripAsciiWhitespace(text.substr(0, eq))));
  for (absl::string_view c : absl::StrSplit(text.substr(eq + 1), ',')) {
    attribute.add_categories(std::string(absl::StripAsciiWhitespace(c)));
  }
  return attribute;
}

absl::Status DatasetCreate(Context& ctx) {
  v1::CreateDatasetRequest req;
  req.set_name(ctx.flags().Get("name"));
  for (const std::string& text : ctx.flags().GetAll("attribute")) {
    ASSIGN_OR_RETURN(*req.add_attributes(), ParseAttribute(text));
  }
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  ASSIGN_OR_RETURN(v1::CreateDatasetResponse resp, client->CreateDataset(req));
  if (ctx.json()) {
    PrintJson(resp);
  } else {
    google::protobuf::RepeatedPtrField<v1::Dataset> one;
    *one.Add() = resp.dataset();
    PrintDatasets(one);
  }
  return absl::OkStatus();
}

absl::Status DatasetList(Context& ctx) {
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  ASSIGN_OR_RETURN(v1::ListDatasetsResponse resp, client->ListDatasets());
  if (ctx.json()) {
    PrintJson(resp);
  } else {
    PrintDatasets(resp.datasets());
  }
  return absl::OkStatus();
}

absl::Status DatasetDelete(Context& ctx) {
  if (!ctx.flags().GetBool("yes")) {
    return UsageError(
        "deleting a dataset removes its subjects, tables and artifacts (the "
        "ledger stays); pass --yes to confirm");
  }
  v1::DeleteDatasetRequest req;
  req.set_name(ctx.flags().Get("name"));
  req.set_confirm(true);
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  ASSIGN_OR_RETURN(v1::DeleteDatasetResponse resp, client->DeleteDataset(req));
  if (ctx.json()) {
    PrintJson(resp);
  } else {
    std::cout << "deleted dataset '" << req.name() << "'\n";
  }
  return absl::OkStatus();
}

absl::Status Import(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  const std::string path = flags.Get("csv");
  const std::string key_column = flags.Get("key-column");
  ASSIGN_OR_RETURN(const int64_t chunk_rows, flags.GetInt("chunk-rows", 20000));
  if (chunk_rows <= 0) return UsageError("--chunk-rows must be > 0");
  ASSIGN_OR_RETURN(const std::string secret, OptionalSecret(flags));
  std::vector<std::string> specs = flags.GetList("attributes");
  if (specs.empty()) return UsageError("--attributes must name at least one attribute");

  // The file is read twice in bounded memory: once to check every row, so that a bad field
  // is reported before anything is sent, then again to send it.
  // The checking pass also hashes the file for the default batch id.
  Sha256Hasher content_hash;
  auto rows = [&](bool send) -> absl::StatusOr<ChunkProducer<v1::SubjectRows>> {
    CsvReader::ByteObserver hash;
    if (!send) hash = [&content_hash](absl::string_view bytes) { content_hash.Update(bytes); };
    ASSIGN_OR_RETURN(std::shared_ptr<CsvReader> reader, CsvReader::Open(path, std::move(hash)));
    if (!send && !reader->header_note().empty()) {
      std::cerr << "note: " << reader->header_note() << "\n";
    }
    // --attributes sex,race or sex=gender_column: vault attribute name, then CSV column.
    std::vector<size_t> columns;
    for (const std::string& spec : specs) {
      std::vector<std::string> parts = absl::StrSplit(spec, absl::MaxSplits('=', 1));
      absl::StatusOr<size_t> index = reader->ColumnIndex(parts.size() == 2 ? parts[1] : parts[0]);
      if (!index.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": ", index.status().message()));
      }
      columns.push_back(*index);
    }
    ASSIGN_OR_RETURN(KeyColumn keys,
                     KeyColumn::Resolve(reader->header(), path, key_column, secret));
    return CsvChunks<v1::SubjectRows>(reader, static_cast<size_t>(chunk_rows),
                                      [=](const std::vector<std::string>& fields, int64_t line,
                                          v1::SubjectRows* chunk) mutable -> absl::Status {
                                        ASSIGN_OR_RETURN(*chunk->add_subject_keys(),
                                                         keys.Next(fields, line, send));
                                        for (size_t c : columns) chunk->add_categories(fields[c]);
                                        return absl::OkStatus();
                                      });
  };
  ASSIGN_OR_RETURN(const ChunkProducer<v1::SubjectRows> check, rows(false));
  ASSIGN_OR_RETURN(const int64_t row_count, DrainRows(check));

  v1::ImportHeader header;
  header.set_dataset(flags.Get("dataset"));
  for (const std::string& spec : specs) {
    header.add_attributes(
        std::vector<std::string>(absl::StrSplit(spec, absl::MaxSplits('=', 1)))[0]);
  }
  // Default batch id: the file's content and how it is read, so a re-run is a no-op and a
  // changed file or mapping is a new batch. The secret enters only through an HMAC of a
  // constant, so the id reveals nothing about it.
  std::string batch_id = flags.Get("batch-id");
  if (batch_id.empty()) {
    content_hash.Update(absl::StrCat(
        std::string(1, '\0'), key_column, std::string(1, '\0'), absl::StrJoin(specs, ","),
        std::string(1, '\0'), secret.empty() ? "" : Pseudonymise(secret, "fairvault-batch-id")));
    batch_id = content_hash.HexDigest();
  }
  header.set_batch_id(batch_id);

  ASSIGN_OR_RETURN(Client * client, ctx.client());
  ASSIGN_OR_RETURN(const ChunkProducer<v1::SubjectRows> send, rows(true));
  ASSIGN_OR_RETURN(v1::ImportAttributesResponse resp, client->ImportAttributesStream(header, send));
  if (ctx.json()) {
    PrintJson(resp);
  } else {
    std::cout << "batch id: " << batch_id
              << "\nrows imported: " << (resp.replayed() ? 0 : resp.rows_imported()) << " of "
              << row_count
              << (resp.replayed() ? " (batch already imported with identical content)" : "")
              << "\nsubjects in dataset '" << header.dataset() << "': " << resp.subject_count()
              << "\n";
  }
  return absl::OkStatus();
}

absl::Status AccountCreate(Context& ctx) {
  v1::CreateAccountRequest req;
  req.set_name(ctx.flags().Get("name"));
  const std::string role = absl::AsciiStrToLower(ctx.flags().Get("role"));
  if (role == "company") {
    req.set_role(v1::ROLE_COMPANY);
  } else if (role == "auditor") {
    req.set_role(v1::ROLE_AUDITOR);
  } else if (role == "regulator") {
    req.set_role(v1::ROLE_REGULATOR);
  } else {
    return UsageError(
        absl::StrCat("--role must be company, auditor or regulator (got '", role, "')"));
  }
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  // --out: the key file is created (new, 0600) before the account, so that a key shown once
  // never meets a file it cannot be written to; it is removed if the account is not created.
  const std::string out_path = ctx.flags().Get("out");
  if (!out_path.empty()) {
    if (absl::Status created = CreateNewPrivateFile(out_path); !created.ok()) {
      return UsageError(absl::StrCat("--out: ", created.message()));
    }
  }
  absl::StatusOr<v1::CreateAccountResponse> created = client->CreateAccount(req);
  if (!created.ok() && !out_path.empty()) std::remove(out_path.c_str());
  ASSIGN_OR_RETURN(v1::CreateAccountResponse resp, std::move(created));
  if (!out_path.empty()) {
    if (absl::Status written = WriteStringToFile(out_path, resp.api_key() + "\n"); !written.ok()) {
      return absl::DataLossError(absl::StrCat(written.message(), "; the account '",
                                              resp.account().name(),
                                              "' exists but its key is lost: create another"));
    }
    resp.clear_api_key();  // --json below shows the account, not the key
  }
  if (ctx.json()) {
    PrintJson(resp);
    return absl::OkStatus();
  }
  if (!out_path.empty()) {
    std::cerr << "created " << RoleName(resp.account().role()) << " account '"
              << resp.account().name() << "'; its API key is in " << out_path
              << " (mode 0600, shown nowhere else; the vault keeps only a salted hash)\n";
    return absl::OkStatus();
  }
  std::cerr << "created " << RoleName(resp.account().role()) << " account '"
            << resp.account().name()
            << "'. Its API key follows on stdout and is shown only this once: store it now "
               "(the vault keeps only a salted hash).\n";
  std::cout << resp.api_key() << "\n";
  return absl::OkStatus();
}

absl::Status AccountList(Context& ctx) {
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  ASSIGN_OR_RETURN(v1::ListAccountsResponse resp, client->ListAccounts());
  if (ctx.json()) {
    PrintJson(resp);
    return absl::OkStatus();
  }
  TextTable table({"NAME", "ROLE", "CREATED"});
  for (const v1::Account& a : resp.accounts()) {
    table.AddRow({a.name(), RoleName(a.role()), FormatUnixSeconds(a.created_unix())});
  }
  std::cout << (resp.accounts().empty() ? "(no accounts)\n" : table.Render());
  return absl::OkStatus();
}

// A grant's or a cap's response: the JSON, or the budget as one row of `budgets`' table.
void PrintBudget(Context& ctx, const google::protobuf::Message& resp, const v1::Budget& budget) {
  if (ctx.json()) {
    PrintJson(resp);
    return;
  }
  google::protobuf::RepeatedPtrField<v1::Budget> one;
  *one.Add() = budget;
  std::cout << FormatBudgets(one);
}

absl::Status Grant(Context& ctx) {
  v1::GrantBudgetRequest req;
  req.set_company(ctx.flags().Get("company"));
  req.set_dataset(ctx.flags().Get("dataset"));
  ASSIGN_OR_RETURN(const double epsilon, RequiredEpsilon(ctx.flags()));
  ASSIGN_OR_RETURN(const double delta, ctx.flags().GetDouble("delta", 0));
  req.set_epsilon(epsilon);
  req.set_delta(delta);
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  ASSIGN_OR_RETURN(v1::GrantBudgetResponse resp, client->GrantBudget(req));
  PrintBudget(ctx, resp, resp.budget());
  return absl::OkStatus();
}

absl::Status Cap(Context& ctx) {
  v1::SetDatasetCapRequest req;
  req.set_dataset(ctx.flags().Get("dataset"));
  ASSIGN_OR_RETURN(const double epsilon, RequiredEpsilon(ctx.flags()));
  ASSIGN_OR_RETURN(const double delta, ctx.flags().GetDouble("delta", 0));
  req.set_epsilon(epsilon);
  req.set_delta(delta);
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  ASSIGN_OR_RETURN(v1::SetDatasetCapResponse resp, client->SetDatasetCap(req));
  PrintBudget(ctx, resp, resp.cap());
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> RegulatorCommands() {
  return {
      {"dataset create",
       "create a dataset and its protected attributes (regulator)",
       "Example: fairvault dataset create --name adult --attribute sex=Female,Male\n"
       "         --attribute race=White,Black,Asian-Pac-Islander,Amer-Indian-Eskimo,Other",
       {{"name", "NAME", "dataset name, [a-z0-9_-]{1,64}", true},
        {"attribute", "NAME=CAT1,CAT2,...", "a protected attribute and its categories (code order)",
         true, true}},
       true,
       DatasetCreate},
      {"dataset list",
       "list datasets with subject counts and caps (regulator)",
       "",
       {},
       true,
       DatasetList},
      {"dataset delete",
       "delete a dataset, its subjects, tables and artifacts (regulator)",
       "",
       {{"name", "NAME", "dataset to delete", true}, {"yes", "", "confirm the deletion"}},
       true,
       DatasetDelete},
      {"import",
       "stream protected attributes of subjects from a CSV (regulator)",
       "Each data row is one subject: its key and its category for every dataset attribute.\n"
       "Re-running the same import is a no-op (same batch id, same content).",
       {{"dataset", "NAME", "target dataset", true},
        {"csv", "FILE", "CSV with a header row", true},
        {"key-column", "COLUMN|@row",
         "column holding subject keys; @row uses row-<0-based data row index>", true},
        {"attributes", "ATTR[=COLUMN],...",
         "every dataset attribute, read from the column of the same name or COLUMN", true, true},
        {"batch-id", "ID", "batch id (default: hex SHA-256 of the file content and mapping)"},
        {"hmac-secret-file", "FILE",
         "pseudonymise keys as hex HMAC-SHA256 with the secret in FILE (>= 16 bytes)"},
        {"chunk-rows", "N", "rows per stream message (default 20000)"}},
       true,
       Import},
      {"account create",
       "create an account and print its API key once (regulator)",
       "",
       {{"name", "NAME", "account name, [a-z0-9_-]{1,64}", true},
        {"role", "company|auditor|regulator", "the account's role", true},
        {"out", "FILE",
         "write the API key into the new FILE (mode 0600; refused if FILE exists) instead "
         "of stdout"}},
       true,
       AccountCreate},
      {"account list", "list accounts (regulator)", "", {}, true, AccountList},
      {"grant",
       "set a company's epsilon budget on a dataset (regulator)",
       "Replaces any earlier grant; a grant below what is spent stops further spending.",
       {{"company", "NAME", "company account", true},
        {"dataset", "NAME", "dataset", true},
        {"epsilon", "EPS", "total epsilon the company may spend (> 0)", true},
        {"delta", "DELTA", "delta in [0, 1) for (epsilon, delta) accounting (default 0)"}},
       true,
       Grant},
      {"cap",
       "set a dataset-wide epsilon cap over all companies (regulator)",
       "",
       {{"dataset", "NAME", "dataset", true},
        {"epsilon", "EPS", "cap on the composed spend of all companies (> 0)", true},
        {"delta", "DELTA", "delta in [0, 1) at which the cap is measured (default 0)"}},
       true,
       Cap},
  };
}

}  // namespace fairvault::client::cli
