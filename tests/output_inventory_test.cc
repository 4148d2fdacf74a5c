// Issue 19 §1: every field a caller can receive is classified in docs/privacy.md §8 ("Output
// inventory") as public, a release, or post-processing of a named release. This test walks the
// fairvault.v1 services' descriptors from every method's response message through every message
// field, and fails when a reachable field has no row there, or a row names a field that does not
// exist, or a row's class is not one of the three: a new field cannot ship unclassified.
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "fairvault/v1/fairvault.pb.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"

namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

// "Message.field" relative to the package, nested messages with their parents ("A.B.field").
std::string FieldName(const FieldDescriptor* field) {
  const std::string& full = field->full_name();
  const std::string prefix = "fairvault.v1.";
  return full.compare(0, prefix.size(), prefix) == 0 ? full.substr(prefix.size()) : full;
}

// Every file of the package: fairvault.proto and what it imports, transitively (it imports
// every part of the contract).
std::vector<const google::protobuf::FileDescriptor*> PackageFiles() {
  std::vector<const google::protobuf::FileDescriptor*> files = {
      fairvault::v1::NoisyCountsRequest::descriptor()->file()->pool()->FindFileByName(
          "fairvault/v1/fairvault.proto")};
  std::set<const google::protobuf::FileDescriptor*> seen(files.begin(), files.end());
  for (size_t i = 0; i < files.size(); ++i) {
    for (int d = 0; d < files[i]->dependency_count(); ++d) {
      const google::protobuf::FileDescriptor* dep = files[i]->dependency(d);
      if (dep->package() == "fairvault.v1" && seen.insert(dep).second) files.push_back(dep);
    }
  }
  return files;
}

// Every field reachable from the services' responses.
std::set<std::string> ReachableResponseFields() {
  std::vector<const Descriptor*> stack;
  for (const google::protobuf::FileDescriptor* file : PackageFiles()) {
    for (int s = 0; s < file->service_count(); ++s) {
      for (int m = 0; m < file->service(s)->method_count(); ++m) {
        stack.push_back(file->service(s)->method(m)->output_type());
      }
    }
  }
  std::set<const Descriptor*> seen;
  std::set<std::string> fields;
  while (!stack.empty()) {
    const Descriptor* message = stack.back();
    stack.pop_back();
    if (!seen.insert(message).second) continue;
    for (int f = 0; f < message->field_count(); ++f) {
      const FieldDescriptor* field = message->field(f);
      fields.insert(FieldName(field));
      if (field->type() == FieldDescriptor::TYPE_MESSAGE) stack.push_back(field->message_type());
    }
  }
  return fields;
}

struct Row {
  std::string classification;
  std::string source;
};

// The rows of §8's first table: | `Message.field` | class | source |
std::map<std::string, Row> InventoryRows() {
  std::ifstream in(FAIRVAULT_PRIVACY_DOC);
  EXPECT_TRUE(in.good()) << "cannot read " << FAIRVAULT_PRIVACY_DOC;
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const size_t section = doc.find("## 8. Output inventory");
  EXPECT_NE(section, std::string::npos) << "docs/privacy.md has no section 8";
  std::map<std::string, Row> rows;
  if (section == std::string::npos) return rows;
  const std::regex row(R"(^\| `([A-Za-z0-9_.]+)` \| ([a-z]+) \| (.*) \|$)");
  std::istringstream lines(doc.substr(section));
  std::string line;
  while (std::getline(lines, line)) {
    std::smatch match;
    if (!std::regex_match(line, match, row)) continue;
    EXPECT_TRUE(rows.emplace(match[1], Row{match[2], match[3]}).second)
        << "field listed twice: " << match[1];
  }
  return rows;
}

TEST(OutputInventoryTest, EveryResponseFieldIsClassifiedAndEveryRowIsAField) {
  const std::set<std::string> fields = ReachableResponseFields();
  const std::map<std::string, Row> rows = InventoryRows();
  ASSERT_GT(fields.size(), 250u);  // the walk found the responses
  int services = 0;
  for (const auto* file : PackageFiles()) services += file->service_count();
  ASSERT_EQ(services, 3);  // regulator, company, auditor: the walk started from each
  for (const std::string& field : fields) {
    EXPECT_TRUE(rows.count(field) > 0)
        << field << " is returned to callers but not classified in docs/privacy.md §8";
  }
  for (const auto& [name, row] : rows) {
    EXPECT_TRUE(fields.count(name) > 0)
        << "docs/privacy.md §8 lists " << name << ", which no response contains";
    EXPECT_TRUE(row.classification == "public" || row.classification == "release" ||
                row.classification == "post")
        << name << ": class '" << row.classification << "' is not public, release or post";
    EXPECT_FALSE(row.source.empty()) << name << ": no source";
  }
}

// The classes that matter most are where they should be: a noisy count is a release, a budget a
// public function of declared costs, a job's elapsed time public (its work does not depend on a).
TEST(OutputInventoryTest, KnownFieldsHaveTheirClass) {
  const std::map<std::string, Row> rows = InventoryRows();
  const std::map<std::string, std::string> expected = {
      {"CountCell.noisy_count", "release"},   {"CountCell.ci_low", "post"},
      {"Budget.epsilon_spent", "public"},     {"Job.elapsed_seconds", "public"},
      {"DecideResponse.outputs", "release"},  {"FairModel.notes", "post"},
      {"DenseLayer.weights", "release"},      {"UploadTableResponse.rows_in_vault", "public"}};
  for (const auto& [name, classification] : expected) {
    auto it = rows.find(name);
    ASSERT_NE(it, rows.end()) << name;
    EXPECT_EQ(it->second.classification, classification) << name;
  }
}

}  // namespace
