// nvmfctl tgt: the words after METHOD -> params, and the typing of each value.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "params.h"

namespace nvmf::ctl {
namespace {

TEST(ParamValue, JsonScalarsArraysAndObjectsAreJson) {
  EXPECT_EQ(parse_param_value("1024"), Json(1024));
  EXPECT_TRUE(parse_param_value("1024").is_number_unsigned());
  EXPECT_EQ(parse_param_value("-7"), Json(-7));
  EXPECT_EQ(parse_param_value("1.5"), Json(1.5));
  EXPECT_EQ(parse_param_value("1e3"), Json(1000.0));
  EXPECT_EQ(parse_param_value("true"), Json(true));
  EXPECT_EQ(parse_param_value("false"), Json(false));
  EXPECT_TRUE(parse_param_value("null").is_null());
  EXPECT_EQ(parse_param_value("[1, \"a\"]"), Json::parse("[1, \"a\"]"));
  EXPECT_EQ(parse_param_value("{\"a\": {\"b\": 2}}"), Json::parse("{\"a\": {\"b\": 2}}"));
  EXPECT_EQ(parse_param_value("18446744073709551615"), Json(uint64_t{18446744073709551615u}));
}

TEST(ParamValue, AnythingElseIsText) {
  EXPECT_EQ(parse_param_value("M1"), Json("M1"));
  EXPECT_EQ(parse_param_value("nqn.2026-11.io.example:a"), Json("nqn.2026-11.io.example:a"));
  EXPECT_EQ(parse_param_value("10.0.0.1"), Json("10.0.0.1"));
  EXPECT_EQ(parse_param_value("0x10"), Json("0x10"));  // not JSON: hex stays text
  EXPECT_EQ(parse_param_value("007"), Json("007"));    // leading zeros are not JSON numbers
  EXPECT_EQ(parse_param_value("True"), Json("True"));
  EXPECT_EQ(parse_param_value(""), Json(""));
  EXPECT_EQ(parse_param_value(" 12"), Json(" 12"));  // typed with a blank: text
  EXPECT_EQ(parse_param_value("12 "), Json("12 "));
  EXPECT_EQ(parse_param_value("[1,"), Json("[1,"));  // broken JSON: text, the target says why
  EXPECT_EQ(parse_param_value("1 2"), Json("1 2"));
}

TEST(ParamValue, AQuotedJsonStringIsThatString) {
  EXPECT_EQ(parse_param_value("\"1024\""), Json("1024"));
  EXPECT_EQ(parse_param_value("\"null\""), Json("null"));
  EXPECT_EQ(parse_param_value("\"a\\\"b\""), Json("a\"b"));
}

MethodArgs parse_ok(const std::vector<std::string>& words) {
  MethodArgs args;
  const std::string error = parse_method_args(words, &args);
  EXPECT_EQ(error, "");
  return args;
}

std::string parse_error(const std::vector<std::string>& words) {
  MethodArgs args;
  return parse_method_args(words, &args);
}

TEST(MethodArgs, NoWordsIsAnEmptyObject) {
  const MethodArgs args = parse_ok({});
  EXPECT_TRUE(args.params.is_object());
  EXPECT_TRUE(args.params.empty());
  EXPECT_FALSE(args.help);
  EXPECT_EQ(args.output, "");
}

TEST(MethodArgs, KeyValueAndKeyEqualsValue) {
  const MethodArgs args = parse_ok({"--type", "malloc", "--name=M1", "--num_blocks", "1024",
                                    "--block_size=4096", "--allow_any_host", "true"});
  EXPECT_EQ(args.params, Json::parse(R"({"type": "malloc", "name": "M1", "num_blocks": 1024,
                                         "block_size": 4096, "allow_any_host": true})"));
}

TEST(MethodArgs, EqualsFormKeepsTheRestOfTheWord) {
  const MethodArgs args = parse_ok({"--a=b=c", "--empty=", "--dashes=--x", "--neg", "-1"});
  EXPECT_EQ(args.params["a"], "b=c");
  EXPECT_EQ(args.params["empty"], "");
  EXPECT_EQ(args.params["dashes"], "--x");
  EXPECT_EQ(args.params["neg"], -1);
}

TEST(MethodArgs, KeysAreTakenAsTyped) {
  const MethodArgs args = parse_ok({"--num-blocks", "8"});
  EXPECT_TRUE(args.params.contains("num-blocks"));
}

TEST(MethodArgs, ParamsGivesTheWholeObjectAndMergesWithKeys) {
  MethodArgs args = parse_ok({"--params", R"({"nqn": "nqn.a:b", "nsid": 3})"});
  EXPECT_EQ(args.params, Json::parse(R"({"nqn": "nqn.a:b", "nsid": 3})"));
  args = parse_ok({"--bdev", "M1", "--params={\"nqn\": \"nqn.a:b\"}"});
  EXPECT_EQ(args.params, Json::parse(R"({"nqn": "nqn.a:b", "bdev": "M1"})"));
}

TEST(MethodArgs, AKeyTwiceIsAnError) {
  EXPECT_EQ(parse_error({"--name", "a", "--name", "b"}), "--name given twice");
  EXPECT_EQ(parse_error({"--name=a", "--name", "a"}), "--name given twice");
  EXPECT_EQ(parse_error({"--params", R"({"name": "a"})", "--name", "b"}),
            "--name given twice (also in --params)");
  EXPECT_EQ(parse_error({"--name", "b", "--params", R"({"name": "a"})"}),
            "--name given twice (also in --params)");
  EXPECT_EQ(parse_error({"--params", "{}", "--params", "{}"}), "--params given twice");
}

TEST(MethodArgs, MissingValuesAndStrayWordsAreErrors) {
  EXPECT_EQ(parse_error({"--name"}), "--name needs a value (--name VALUE or --name=VALUE)");
  EXPECT_EQ(parse_error({"--name", "--type", "malloc"}),
            "--name needs a value (--name VALUE or --name=VALUE)");
  EXPECT_NE(parse_error({"M1"}).find("unexpected 'M1'"), std::string::npos);
  EXPECT_NE(parse_error({"--name", "a", "b"}).find("unexpected 'b'"), std::string::npos);
  EXPECT_NE(parse_error({"--"}).find("unexpected '--'"), std::string::npos);
  EXPECT_NE(parse_error({"-x", "1"}).find("unexpected '-x'"), std::string::npos);
  EXPECT_EQ(parse_error({"--=1"}), "'--=1': no key before '='");
  EXPECT_EQ(parse_error({"-o"}), "-o needs a value: human or json");
}

TEST(MethodArgs, ParamsMustBeAnObject) {
  EXPECT_NE(parse_error({"--params", "[1]"}).find("not a JSON object"), std::string::npos);
  EXPECT_NE(parse_error({"--params", "{"}).find("not a JSON object"), std::string::npos);
  EXPECT_NE(parse_error({"--params", "nqn"}).find("not a JSON object"), std::string::npos);
}

TEST(MethodArgs, HelpAndOutputAreTheTools) {
  MethodArgs args = parse_ok({"--nqn", "nqn.a:b", "--help"});
  EXPECT_TRUE(args.help);
  EXPECT_FALSE(args.params.contains("help"));
  args = parse_ok({"-h"});
  EXPECT_TRUE(args.help);
  args = parse_ok({"-o", "json", "--nqn", "x"});
  EXPECT_EQ(args.output, "json");
  EXPECT_EQ(args.params, Json::parse(R"({"nqn": "x"})"));
  args = parse_ok({"-ojson"});
  EXPECT_EQ(args.output, "json");
}

}  // namespace
}  // namespace nvmf::ctl
