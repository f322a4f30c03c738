// PATTERN-SPEC: parsing, printing, defaults, building masks by name (equal to the direct generator
// calls), composition with | and &, the pattern listing, terminal pictures, and every error.
#include <sparse_formats/error.hpp>
#include <sparse_formats/patterns.hpp>

#include "support/pattern_checks.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace sf = sparse_formats;

namespace {

using spattn::testing::pattern_checks::expect_error;

void expect_spec_error(const std::string& spec, const std::string& expected) {
  SCOPED_TRACE("spec: " + spec);
  expect_error([&] { sf::parse_pattern_spec(spec); }, expected);
}

void expect_make_error(const std::string& spec, int64_t nq, int64_t nk,
                       const std::string& expected) {
  SCOPED_TRACE("spec: " + spec);
  const sf::PatternSpec parsed = sf::parse_pattern_spec(spec);  // parses; the values are wrong
  expect_error([&] { sf::make_pattern(parsed, nq, nk); }, expected);
}

template <typename Index>
void expect_same(const sf::CsrPattern<Index>& a, const sf::CsrPattern<Index>& b) {
  EXPECT_EQ(a.num_rows, b.num_rows);
  EXPECT_EQ(a.num_cols, b.num_cols);
  EXPECT_EQ(a.row_ptr, b.row_ptr);
  EXPECT_EQ(a.col_idx, b.col_idx);
}

sf::CsrPattern<int32_t> make(const std::string& spec, int64_t nq, int64_t nk) {
  return sf::make_pattern(sf::parse_pattern_spec(spec), nq, nk);
}

}  // namespace

// ---- parsing
// -------------------------------------------------------------------------------------

TEST(PatternSpec, ParsesNamesKeysAndValues) {
  const auto plain = sf::parse_pattern_spec("causal");
  EXPECT_EQ(plain.name, "causal");
  EXPECT_TRUE(plain.params.empty());
  EXPECT_FALSE(plain.is_composite());
  const auto bigbird = sf::parse_pattern_spec("bigbird:w=3,g=2,r=3,block=64,seed=7");
  EXPECT_EQ(bigbird.name, "bigbird");
  EXPECT_EQ(bigbird.params,
            (std::map<std::string, std::string>{
                {"w", "3"}, {"g", "2"}, {"r", "3"}, {"block", "64"}, {"seed", "7"}}));
  EXPECT_EQ(sf::parse_pattern_spec("documents:lengths=100/200/300,causal=1").params.at("lengths"),
            "100/200/300");
  // Whitespace between tokens is ignored.
  EXPECT_EQ(sf::parse_pattern_spec("  sliding_window : w = 128 , causal = true "),
            sf::parse_pattern_spec("sliding_window:w=128,causal=true"));
}

TEST(PatternSpec, BriefExamplesBuildTheDirectPatterns) {
  expect_same(make("causal", 97, 97), sf::causal_pattern(97, 97));
  expect_same(make("sliding_window:w=128", 300, 300), sf::sliding_window_pattern(300, 300, 128));
  expect_same(make("sliding_window:w=128,causal=1", 300, 257),
              sf::sliding_window_pattern(300, 257, 128, true));
  expect_same(make("bigbird:w=3,g=2,r=3,block=64,seed=7", 1000, 1000),
              sf::bigbird_pattern(1000, 1000, {64, 3, 2, 3, 7}));
  expect_same(make("random:p=0.05,seed=1", 257, 257), sf::random_pattern(257, 257, 0.05, 1));
  expect_same(make("documents:lengths=100/200/300,causal=1", 600, 600),
              sf::documents_pattern(600, 600, {100, 200, 300}, {}, true));
  expect_same(make("documents:lengths=1/2,lengths_k=2/3,causal=1", 3, 5),
              sf::documents_pattern(3, 5, {1, 2}, {2, 3}, true));
  expect_same(make("dilated_window:w=2,dilation=3,causal=1", 97, 97),
              sf::dilated_window_pattern(97, 97, 2, 3, true));
  expect_same(make("global_window:w=4,g=2", 97, 50), sf::global_window_pattern(97, 50, 4, 2));
  expect_same(make("strided:stride=8,causal=0", 97, 97), sf::strided_pattern(97, 97, 8, false));
  expect_same(make("fixed:stride=8,c=2", 97, 97), sf::fixed_pattern(97, 97, 8, 2));
  expect_same(make("prefix_lm:p=10", 97, 97), sf::prefix_lm_pattern(97, 97, 10));
  expect_same(make("random_blocks:block_m=8,block_n=4,p=0.3,seed=2", 97, 61),
              sf::random_blocks_pattern(97, 61, 8, 4, 0.3, 2));
  expect_same(make("full", 7, 13), sf::full_pattern(7, 13));
  expect_same(sf::make_pattern<int64_t>(sf::parse_pattern_spec("causal"), 7, 7),
              sf::causal_pattern<int64_t>(7, 7));
}

TEST(PatternSpec, DefaultsAreTheDocumentedOnes) {
  expect_same(make("sliding_window", 300, 300), sf::sliding_window_pattern(300, 300, 128));
  expect_same(make("dilated_window", 300, 300), sf::dilated_window_pattern(300, 300, 64, 2));
  expect_same(make("global_window", 300, 300), sf::global_window_pattern(300, 300, 128, 1));
  expect_same(make("strided", 300, 300), sf::strided_pattern(300, 300, 128, true));
  expect_same(make("fixed", 300, 300), sf::fixed_pattern(300, 300, 128, 8, true));
  expect_same(make("bigbird", 700, 700), sf::bigbird_pattern(700, 700, {}));
  expect_same(make("prefix_lm", 300, 300), sf::prefix_lm_pattern(300, 300, 256));
  expect_same(make("random", 300, 300), sf::random_pattern(300, 300, 0.05, 0));
  expect_same(make("random_blocks", 300, 300), sf::random_blocks_pattern(300, 300, 64, 64, 0.1, 0));
  expect_same(make("random_blocks:block=32,block_n=16", 300, 300),
              sf::random_blocks_pattern(300, 300, 32, 16, 0.1, 0));
  // documents without lengths: num_docs (4) near-equal documents, on each axis when rectangular.
  expect_same(make("documents", 10, 10), sf::documents_pattern(10, 10, {2, 3, 2, 3}));
  expect_same(make("documents:num_docs=2,causal=1", 4, 6),
              sf::documents_pattern(4, 6, {2, 2}, {3, 3}, true));
}

TEST(PatternSpec, EveryListedPatternIsDocumentedAndItsExampleBuilds) {
  const auto infos = sf::list_patterns();
  ASSERT_EQ(infos.size(), 12u);
  std::set<std::string> names;
  for (const auto& info : infos) {
    SCOPED_TRACE(info.name);
    EXPECT_TRUE(names.insert(info.name).second);
    EXPECT_FALSE(info.description.empty());
    EXPECT_FALSE(info.reference.empty());
    for (const auto& param : info.params) {
      EXPECT_FALSE(param.meaning.empty()) << param.key;
      EXPECT_FALSE(param.type.empty()) << param.key;
    }
    const auto example = sf::parse_pattern_spec(info.example);
    EXPECT_EQ(example.name, info.name);
    EXPECT_GT(sf::make_pattern(example, 600, 600).nnz(), 0);
    EXPECT_GT(sf::make_pattern(sf::parse_pattern_spec(info.name), 257, 257).nnz(), 0);
  }
  EXPECT_TRUE(std::is_sorted(infos.begin(), infos.end(),
                             [](const auto& a, const auto& b) { return a.name < b.name; }));
  EXPECT_NE(sf::pattern_spec_syntax().find("'&'"), std::string::npos);
}

TEST(PatternSpec, SizesZeroOneAndRectangularWork) {
  for (const auto& info : sf::list_patterns()) {
    const std::string spec = info.name == "documents" ? "documents:num_docs=1" : info.name;
    for (const auto& [nq, nk] :
         std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {1, 1}, {7, 13}, {13, 7}}) {
      SCOPED_TRACE(spec + " " + std::to_string(nq) + " x " + std::to_string(nk));
      const auto mask = make(spec, nq, nk);
      EXPECT_EQ(mask.num_rows, nq);
      EXPECT_EQ(mask.num_cols, nk);
      EXPECT_EQ(mask.row_ptr.size(), static_cast<size_t>(nq) + 1);
    }
  }
}

// ---- composition, printing, defaults
// --------------------------------------------------------------

TEST(PatternSpec, CompositionBuildsUnionsAndIntersections) {
  const auto bigbird = sf::bigbird_pattern(97, 97, {16, 1, 2, 3, 0});
  const auto causal = sf::causal_pattern(97, 97);
  expect_same(make("bigbird:block=16 & causal", 97, 97),
              sf::pattern_intersection(bigbird.view(), causal.view()));
  const auto window = sf::sliding_window_pattern(97, 97, 3);
  const auto random = sf::random_pattern(97, 97, 0.05, 0);
  expect_same(make("sliding_window:w=3 | random", 97, 97),
              sf::pattern_union(window.view(), random.view()));
  // '&' binds tighter than '|'; parentheses override.
  const auto w_and_c = sf::pattern_intersection(window.view(), causal.view());
  expect_same(make("random | sliding_window:w=3 & causal", 97, 97),
              sf::pattern_union(random.view(), w_and_c.view()));
  const auto r_or_w = sf::pattern_union(random.view(), window.view());
  expect_same(make("(random | sliding_window:w=3) & causal", 97, 97),
              sf::pattern_intersection(r_or_w.view(), causal.view()));
  // Chains are one node; parenthesized groups stay nested.
  EXPECT_EQ(sf::parse_pattern_spec("full | causal | random").operands.size(), 3u);
  EXPECT_EQ(sf::parse_pattern_spec("(full | causal) | random").operands.size(), 2u);
  EXPECT_EQ(sf::parse_pattern_spec("((causal))"), sf::parse_pattern_spec("causal"));
}

TEST(PatternSpec, FormatIsCanonicalAndRoundTrips) {
  EXPECT_EQ(sf::format_pattern_spec(sf::parse_pattern_spec(" bigbird : seed=7, block=64 ")),
            "bigbird:block=64,seed=7");
  EXPECT_EQ(sf::format_pattern_spec(sf::parse_pattern_spec("random|sliding_window:w=3&causal")),
            "random | (sliding_window:w=3 & causal)");
  for (const std::string text :
       {"causal", "documents:causal=1,lengths=1/2/3", "full | causal | random:p=0.5",
        "(full | causal) | random", "fixed & (strided | full)"}) {
    const auto spec = sf::parse_pattern_spec(text);
    EXPECT_EQ(sf::parse_pattern_spec(sf::format_pattern_spec(spec)), spec) << text;
  }
}

TEST(PatternSpec, WithDefaultsWritesEveryDefault) {
  EXPECT_EQ(sf::format_pattern_spec(sf::with_defaults(sf::parse_pattern_spec("bigbird:w=3"))),
            "bigbird:block=64,g=2,r=3,seed=0,w=3");
  EXPECT_EQ(
      sf::format_pattern_spec(sf::with_defaults(sf::parse_pattern_spec("documents:lengths=3/4"))),
      "documents:causal=0,lengths=3/4");
  EXPECT_EQ(
      sf::format_pattern_spec(sf::with_defaults(sf::parse_pattern_spec("random_blocks & causal"))),
      "random_blocks:block=64,p=0.1,seed=0 & causal");
  // The written-out spec builds the same mask.
  expect_same(make("bigbird:w=3", 500, 500),
              sf::make_pattern(sf::with_defaults(sf::parse_pattern_spec("bigbird:w=3")), 500, 500));
}

// ---- errors ------------------------------------------------------------------------------------

TEST(PatternSpecErrors, SyntaxErrorsNameThePosition) {
  expect_spec_error("", "pattern spec '': empty (expected a pattern name)");
  expect_spec_error("   ", "empty (expected a pattern name)");
  expect_spec_error("sliding_window:w",
                    "pattern spec 'sliding_window:w': expected '=' after key 'w' at the end");
  expect_spec_error("sliding_window:w=", "empty value for key 'w' at the end");
  expect_spec_error("sliding_window:w=3,", "expected a key at the end");
  expect_spec_error("sliding_window:=3", "expected a key at character 16");
  expect_spec_error("(causal", "expected ')' at the end");
  expect_spec_error("causal)", "unexpected ')' at character 7");
  expect_spec_error("causal |", "expected a pattern name at the end");
  expect_spec_error("causal full", "unexpected 'f' at character 8");
  expect_spec_error(std::string(65, '(') + "causal" + std::string(65, ')'),
                    "parentheses nested deeper than 64");
}

TEST(PatternSpecErrors, UnknownNamesKeysAndDuplicatesListTheValidOnes) {
  expect_spec_error("sliding",
                    "pattern spec 'sliding': unknown pattern 'sliding' (valid: bigbird, causal, "
                    "dilated_window, documents, fixed, full, global_window, prefix_lm, random, "
                    "random_blocks, sliding_window, strided; combine with | and &)");
  expect_spec_error("Causal", "unknown pattern 'Causal'");
  expect_spec_error("sliding_window:x=3",
                    "unknown key 'x' for sliding_window (valid keys: causal, w)");
  expect_spec_error("causal:w=3", "unknown key 'w' for causal (valid keys: none)");
  expect_spec_error("bigbird:w=1,g=2,w=3", "duplicate key 'w' for bigbird at character 17");
}

TEST(PatternSpecErrors, ValuesOfTheWrongTypeAreNamed) {
  expect_spec_error("sliding_window:w=abc", "sliding_window: w = 'abc' is not an integer");
  expect_spec_error("sliding_window:w=1.5", "w = '1.5' is not an integer");
  expect_spec_error("sliding_window:w=99999999999999999999",
                    "w = '99999999999999999999' is not within the 64-bit");
  expect_spec_error("sliding_window:causal=2",
                    "sliding_window: causal = '2' is not a boolean (0, 1, false or true)");
  expect_spec_error("random:p=abc", "random: p = 'abc' is not a finite real number");
  expect_spec_error("random:p=0.5x", "p = '0.5x' is not a finite real number");
  expect_spec_error("random:p=1e999", "p = '1e999' is not a finite real number");
  expect_spec_error("random:seed=-1", "random: seed = '-1' is not a non-negative integer");
  expect_spec_error("documents:lengths=1//2",
                    "documents: lengths = '1//2' is not a '/'-separated integer list");
  expect_spec_error("documents:lengths=1/x",
                    "documents: lengths item 1 = 'x' is not a 64-bit integer");
}

TEST(PatternSpecErrors, ValueRangesAreCheckedWhenBuilding) {
  expect_make_error("sliding_window:w=-3", 5, 5, "sliding_window: w = -3 must be >= 0");
  expect_make_error("random:p=1.5", 5, 5, "random: p = 1.5 must be a probability in [0, 1]");
  expect_make_error("fixed:stride=4,c=5", 5, 5, "fixed: c = 5 must be <= stride = 4");
  expect_make_error("bigbird:block=0", 5, 5, "bigbird: block = 0 must be >= 1");
  expect_make_error("documents:lengths=1/2", 5, 5, "documents: lengths sum to 3 but seqlen_q = 5");
  expect_make_error("documents:lengths=2/3", 5, 6, "a rectangular mask needs lengths_k");
  expect_make_error("documents:lengths=2/3,num_docs=2", 5, 5,
                    "documents: give lengths or num_docs, not both");
  expect_make_error("documents:lengths_k=2/3", 5, 5, "documents: lengths_k needs lengths");
  expect_make_error("documents", 3, 3, "documents: num_docs = 4 exceeds the 3 tokens to split");
  expect_make_error("random_blocks:block=8,block_m=0", 5, 5,
                    "random_blocks: block_m = 0 must be >= 1");
}

TEST(PatternSpecErrors, HandBuiltSpecsAreCheckedToo) {
  sf::PatternSpec unknown{"nope", {}, {}};
  expect_error([&] { sf::make_pattern(unknown, 4, 4); },
               "pattern spec 'nope': unknown pattern 'nope'");
  sf::PatternSpec bad_key{"causal", {{"w", "1"}}, {}};
  expect_error([&] { sf::make_pattern(bad_key, 4, 4); },
               "pattern spec 'causal:w=1': unknown key 'w'");
  sf::PatternSpec bad_value{"sliding_window", {{"w", "x"}}, {}};
  expect_error([&] { sf::make_pattern(bad_value, 4, 4); },
               "sliding_window: w = 'x' is not an integer");
  sf::PatternSpec empty_union{"union", {}, {}};
  expect_error([&] { sf::make_pattern(empty_union, 4, 4); }, "union has no operands");
  sf::PatternSpec keyed_union{"union", {{"w", "1"}}, {sf::PatternSpec{"causal", {}, {}}}};
  expect_error([&] { sf::make_pattern(keyed_union, 4, 4); }, "union takes no keys");
  sf::PatternSpec leaf_with_operands{"causal", {}, {sf::PatternSpec{"full", {}, {}}}};
  expect_error([&] { sf::make_pattern(leaf_with_operands, 4, 4); },
               "causal is not a composition but has 1 operands");
  expect_error([&] { sf::with_defaults(unknown); }, "unknown pattern 'nope'");
}

// ---- terminal pictures
// ---------------------------------------------------------------------------

TEST(RenderMask, SmallMasksDrawElementByElement) {
  EXPECT_EQ(sf::render_mask_blocks(sf::causal_pattern(4, 4).view()), "#...\n##..\n###.\n####\n");
  EXPECT_EQ(sf::render_mask_blocks(sf::causal_pattern(0, 4).view()), "");
  EXPECT_EQ(sf::render_mask_blocks(sf::causal_pattern(4, 0).view()), "");
}

TEST(RenderMask, LargeMasksDrawCellsFullPartialEmpty) {
  // 8 x 8 causal in 4 x 4 cells of 2: diagonal cells partial, below full, above empty.
  EXPECT_EQ(sf::render_cell_size(8, 8, 4), 2);
  EXPECT_EQ(sf::render_mask_blocks(sf::causal_pattern(8, 8).view(), 4), "+...\n#+..\n##+.\n###+\n");
  // 5 x 3 at width 3: cells of 2 (to fit 5 rows), edge cells clipped; a full clipped cell is #.
  EXPECT_EQ(sf::render_mask_blocks(sf::full_pattern<int64_t>(5, 3).view(), 3), "##\n##\n##\n");
  EXPECT_EQ(sf::render_cell_size(1000, 10, 64), 16);
  const std::string big =
      sf::render_mask_blocks(sf::sliding_window_pattern(4096, 4096, 256).view());
  EXPECT_EQ(big.size(), 64u * 65u);
  EXPECT_EQ(big.substr(0, 6), "####+.");  // |i - j| <= 256 covers 4 cells, then one partial
}

TEST(RenderMask, RejectsAZeroWidth) {
  expect_error([] { sf::render_mask_blocks(sf::causal_pattern(4, 4).view(), 0); },
               "render_mask_blocks: max_width = 0 must be >= 1");
}
