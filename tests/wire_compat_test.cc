// The wire contract does not move under a refactoring (issue 20). Two records taken before
// proto/fairvault/v1/fairvault.proto was split into one file per service and per artifact:
// - testdata/wire_schema_v1.txt: every field (message, number, name, type, label, type name),
//   oneof member, enum value and RPC (service, method, request, response, streaming) of
//   fairvault.v1 as the single file declared them. Every line must still hold in the generated
//   pool: a field may be added later, none may be renumbered, retyped, renamed or removed.
// - testdata/v1_artifacts/*.binpb: Artifact payloads exactly as a vault stored them (one per
//   body: the three post-processors and a linear and a neural fair model), each with the text
//   `protoc --decode` printed for it then. Each must parse, print the same text (an unknown or
//   renumbered field would print as a bare number) and serialize back to the same bytes.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fairvault/v1/fairvault.pb.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::ServiceDescriptor;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::vector<std::string> Words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// Why one line of the schema record no longer holds, or "" when it does.
std::string Check(const std::vector<std::string>& w) {
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  if (w[0] == "field" && (w.size() == 6 || w.size() == 7)) {
    const Descriptor* message = pool->FindMessageTypeByName(w[1]);
    if (message == nullptr) return "no message " + w[1];
    const FieldDescriptor* field = message->FindFieldByNumber(std::stoi(w[2]));
    if (field == nullptr) return "no field number " + w[2];
    if (field->name() != w[3]) return "field " + w[2] + " is now named " + field->name();
    if (std::to_string(field->type()) != w[4]) return "field " + w[3] + " changed type";
    if (std::to_string(field->label()) != w[5]) return "field " + w[3] + " changed label";
    std::string type_name;
    if (field->message_type() != nullptr) type_name = field->message_type()->full_name();
    if (field->enum_type() != nullptr) type_name = field->enum_type()->full_name();
    if (type_name != (w.size() == 7 ? w[6] : "")) return "field " + w[3] + " is now " + type_name;
    return "";
  }
  if (w[0] == "oneof" && w.size() == 4) {
    const Descriptor* message = pool->FindMessageTypeByName(w[1]);
    if (message == nullptr) return "no message " + w[1];
    const FieldDescriptor* field = message->FindFieldByNumber(std::stoi(w[3]));
    if (field == nullptr || field->containing_oneof() == nullptr ||
        field->containing_oneof()->name() != w[2]) {
      return "field " + w[3] + " left oneof " + w[2];
    }
    return "";
  }
  if (w[0] == "enum" && w.size() == 4) {
    const EnumDescriptor* e = pool->FindEnumTypeByName(w[1]);
    if (e == nullptr) return "no enum " + w[1];
    const auto* value = e->FindValueByName(w[3]);
    if (value == nullptr || std::to_string(value->number()) != w[2]) {
      return "enum value " + w[3] + " is gone or renumbered";
    }
    return "";
  }
  if (w[0] == "rpc" && w.size() == 7) {
    const ServiceDescriptor* service = pool->FindServiceByName(w[1]);
    if (service == nullptr) return "no service " + w[1];
    const auto* method = service->FindMethodByName(w[2]);
    if (method == nullptr) return "no method " + w[2];
    if (method->input_type()->full_name() != w[3] || method->output_type()->full_name() != w[4]) {
      return "method " + w[2] + " changed its messages";
    }
    if (std::to_string(int{method->client_streaming()}) != w[5] ||
        std::to_string(int{method->server_streaming()}) != w[6]) {
      return "method " + w[2] + " changed its streaming";
    }
    return "";
  }
  return "malformed record line";
}

TEST(WireCompatTest, EveryFieldEnumAndRpcOfTheRecordStillHolds) {
  // Linking the generated code registers every file of the package in the pool.
  ASSERT_NE(fairvault::v1::Artifact::descriptor(), nullptr);
  std::istringstream record(ReadFile(FAIRVAULT_TESTDATA "/wire_schema_v1.txt"));
  int lines = 0;
  for (std::string line; std::getline(record, line);) {
    if (line.empty()) continue;
    ++lines;
    const std::string why = Check(Words(line));
    EXPECT_EQ(why, "") << line;
  }
  // The record as taken: 566 lines (fields, oneof members, enum values, 34 RPCs).
  EXPECT_EQ(lines, 566);
}

TEST(WireCompatTest, CheckNoticesAChange) {
  // The checker itself: each kind of line fails when what it records is not so.
  EXPECT_NE(Check(Words("field fairvault.v1.Artifact 1 idx 9 1")), "");
  EXPECT_NE(Check(Words("field fairvault.v1.Artifact 999 id 9 1")), "");
  EXPECT_NE(Check(Words("enum fairvault.v1.Role 7 ROLE_REGULATOR")), "");
  EXPECT_NE(Check(Words("oneof fairvault.v1.Artifact body 1")), "");
  EXPECT_NE(Check(Words("rpc fairvault.v1.CompanyService UploadTable "
                        "fairvault.v1.UploadTableRequest fairvault.v1.UploadTableResponse 0 0")),
            "");
}

class StoredArtifactTest : public testing::TestWithParam<std::string> {};

TEST_P(StoredArtifactTest, DecodesPrintsAndReencodesAsBeforeTheSplit) {
  const std::string base = std::string(FAIRVAULT_TESTDATA) + "/v1_artifacts/" + GetParam();
  const std::string bytes = ReadFile(base + ".binpb");
  ASSERT_FALSE(bytes.empty());
  fairvault::v1::Artifact artifact;
  ASSERT_TRUE(artifact.ParseFromString(bytes));
  EXPECT_NE(artifact.body_case(), fairvault::v1::Artifact::BODY_NOT_SET);
  std::string text;
  ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(artifact, &text));
  EXPECT_EQ(text, ReadFile(base + ".txtpb"));
  std::string again;
  ASSERT_TRUE(artifact.SerializeToString(&again));
  EXPECT_EQ(again, bytes);
}

INSTANTIATE_TEST_SUITE_P(Bodies, StoredArtifactTest,
                         testing::Values("equalized_odds", "statistical_parity",
                                         "equalized_odds_scores", "fair_model_linear",
                                         "fair_model_mlp"));

}  // namespace
