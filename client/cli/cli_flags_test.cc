// Tests of the CLI flag parser.
#include "client/cli/cli_flags.h"

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::client::cli {
namespace {

using ::fairvault::testing::StatusIs;
using ::testing::ElementsAre;

const std::vector<FlagSpec> kSpecs = {
    {"name", "N", "a name", true},
    {"epsilon", "EPS", "cost"},
    {"columns", "C,...", "columns", false, true},
    {"yes", "", "confirm"},
};

absl::StatusOr<ParsedFlags> Parse(std::vector<std::string> args) {
  return ParseFlags(kSpecs, args);
}

TEST(ParseFlagsTest, ReadsSpaceAndEqualsFormsListsAndSwitches) {
  absl::StatusOr<ParsedFlags> f =
      Parse({"--name", "adult", "--epsilon=0.5", "--columns", "a,b", "--columns=c", "--yes"});
  ASSERT_OK(f);
  EXPECT_EQ(f->Get("name"), "adult");
  absl::StatusOr<double> eps = f->GetDouble("epsilon", 0);
  ASSERT_OK(eps);
  EXPECT_EQ(*eps, 0.5);
  EXPECT_THAT(f->GetList("columns"), ElementsAre("a", "b", "c"));
  EXPECT_TRUE(f->GetBool("yes"));
  EXPECT_FALSE(f->help());
}

TEST(ParseFlagsTest, ValuesMayStartWithASingleDash) {
  absl::StatusOr<ParsedFlags> f = Parse({"--name", "x", "--epsilon", "-1"});
  ASSERT_OK(f);
  EXPECT_EQ(f->Get("epsilon"), "-1");
}

TEST(ParseFlagsTest, UsageErrors) {
  auto usage = [](const absl::StatusOr<ParsedFlags>& f) {
    return !f.ok() && IsUsageError(f.status());
  };
  EXPECT_TRUE(usage(Parse({})));                               // missing --name
  EXPECT_TRUE(usage(Parse({"--name", "x", "--bogus", "1"})));  // unknown flag
  EXPECT_TRUE(usage(Parse({"--name"})));                       // missing value
  EXPECT_TRUE(usage(Parse({"--name", "x", "stray"})));         // positional
  EXPECT_TRUE(usage(Parse({"--name", "x", "--name", "y"})));   // not repeatable
  EXPECT_TRUE(usage(Parse({"--name", "x", "--yes=maybe"})));   // bad switch
  // A switch is a flag like the others: twice is a mistake (found by tests/fuzz/fuzz_flags).
  EXPECT_TRUE(usage(Parse({"--name", "x", "--yes", "--yes=false"})));
  EXPECT_THAT(Parse({"--name", "x", "--bogus"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "unknown flag --bogus"));
}

TEST(ParseFlagsTest, HelpSkipsRequiredFlags) {
  absl::StatusOr<ParsedFlags> f = Parse({"--help"});
  ASSERT_OK(f);
  EXPECT_TRUE(f->help());
}

// Issue 19 §3: --help or -h anywhere wins over what else the line holds.
TEST(ParseFlagsTest, HelpAnywhereWinsOverOtherMistakes) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--bogus", "--help"},          // an unknown flag before it
           {"--name", "-h"},               // where --name's value would be
           {"--name", "x", "--name", "y", "-h"},  // a repeated flag
           {"stray", "--help"}}) {         // a bare argument
    absl::StatusOr<ParsedFlags> f = Parse(args);
    ASSERT_OK(f) << args.front();
    EXPECT_TRUE(f->help()) << args.front();
  }
}

TEST(ParseFlagsTest, BareArgumentsFillPositionalFlagsInOrder) {
  const std::vector<FlagSpec> specs = {{"job", "JOB", "job id", true, false, true},
                                       {"timeout", "S", "seconds"},
                                       {"other", "X", "second positional", false, false, true}};
  absl::StatusOr<ParsedFlags> f = ParseFlags(specs, {"job_1", "--timeout", "5", "x"});
  ASSERT_OK(f);
  EXPECT_EQ(f->Get("job"), "job_1");
  EXPECT_EQ(f->Get("other"), "x");
  // The flag form still works, and then a bare argument goes to the next positional.
  f = ParseFlags(specs, {"--job=job_2", "y"});
  ASSERT_OK(f);
  EXPECT_EQ(f->Get("job"), "job_2");
  EXPECT_EQ(f->Get("other"), "y");
  // Missing: still required; one bare argument too many: refused.
  EXPECT_THAT(ParseFlags(specs, {"--timeout", "5"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "missing required flag --job JOB"));
  EXPECT_THAT(ParseFlags(specs, {"a", "b", "c"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "unexpected argument 'c'"));
  EXPECT_THAT(ParseFlags(specs, {"--job", "a", "--job", "b"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "--job given more than once"));
  // Specs without positional flags keep refusing bare arguments.
  EXPECT_THAT(Parse({"--name", "x", "stray"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "unexpected argument 'stray'"));
  EXPECT_NE(FormatFlagHelp(specs).find("--job JOB"), std::string::npos);
  EXPECT_NE(FormatFlagHelp(specs).find("(or bare, without --job)"), std::string::npos);
}

TEST(ParsedFlagsTest, TypedGettersReportBadNumbersAsUsageErrors) {
  absl::StatusOr<ParsedFlags> f = Parse({"--name", "x", "--epsilon", "abc"});
  ASSERT_OK(f);
  absl::StatusOr<double> eps = f->GetDouble("epsilon", 0);
  EXPECT_THAT(eps, StatusIs(absl::StatusCode::kInvalidArgument, "--epsilon must be a finite"));
  EXPECT_TRUE(IsUsageError(eps.status()));
  absl::StatusOr<int64_t> missing = f->GetInt("limit", 7);
  ASSERT_OK(missing);
  EXPECT_EQ(*missing, 7);
  // Decimal only: Abseil's SimpleAtod reads "0x10" as 16, which nobody typing an epsilon means.
  for (const char* hex : {"0x10", "0X1p3", "0x"}) {
    absl::StatusOr<ParsedFlags> h = Parse({"--name", "x", "--epsilon", hex});
    ASSERT_OK(h);
    EXPECT_THAT(h->GetDouble("epsilon", 0),
                StatusIs(absl::StatusCode::kInvalidArgument, "--epsilon must be a finite"))
        << hex;
  }
  for (const auto& [text, value] : std::vector<std::pair<const char*, double>>{
           {"0.25", 0.25}, {"+2", 2}, {" 1e3 ", 1000}, {"-0.5", -0.5}}) {
    absl::StatusOr<ParsedFlags> d = Parse({"--name", "x", "--epsilon", text});
    ASSERT_OK(d);
    absl::StatusOr<double> parsed = d->GetDouble("epsilon", 0);
    ASSERT_OK(parsed);
    EXPECT_EQ(*parsed, value) << text;
  }
}

}  // namespace
}  // namespace fairvault::client::cli
