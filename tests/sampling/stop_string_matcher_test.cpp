#include <gtest/gtest.h>

#include "core/rng.h"
#include "sampling/stop_checker.h"

namespace strata::sampling {
namespace {

struct Streamed {
  std::vector<std::string> pieces;  // what each feed released
  std::string text;                 // everything released, flush included when not stopped
  bool stopped = false;
  int stop_index = -1;
};

Streamed stream(StopStringMatcher& m, const std::vector<std::string>& chunks) {
  Streamed s;
  for (const auto& c : chunks) {
    auto u = m.feed(c);
    s.pieces.emplace_back(u.text);
    s.text += u.text;
    if (u.stopped) {
      s.stopped = true;
      s.stop_index = u.stop_index;
    }
  }
  if (!s.stopped) s.text += m.flush();
  return s;
}

Streamed stream(std::vector<std::string> stop, bool include,
                const std::vector<std::string>& chunks) {
  StopStringMatcher m(std::move(stop), include);
  return stream(m, chunks);
}

TEST(StopStringMatcherTest, NoStopStringsPassesTextThrough) {
  Streamed s = stream({}, false, {"Hello", ", ", "world"});
  EXPECT_EQ(s.pieces, (std::vector<std::string>{"Hello", ", ", "world"}));
  EXPECT_FALSE(s.stopped);
}

TEST(StopStringMatcherTest, TruncatesBeforeTheStopString) {
  Streamed s = stream({"STOP"}, false, {"Hello wor", "ld. STOP here", " more"});
  EXPECT_EQ(s.pieces, (std::vector<std::string>{"Hello wor", "ld. ", ""}));
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.stop_index, 0);
  EXPECT_EQ(s.text, "Hello world. ");
}

TEST(StopStringMatcherTest, StopStringSplitAcrossChunksNeverLeaks) {
  Streamed s = stream({"STOP"}, false, {"abc S", "TO", "P xyz"});
  EXPECT_EQ(s.pieces, (std::vector<std::string>{"abc ", "", ""}));
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.text, "abc ");
  // One byte at a time.
  std::vector<std::string> bytes;
  for (char c : std::string("xxSTOPyy")) bytes.emplace_back(1, c);
  Streamed b = stream({"STOP"}, false, bytes);
  EXPECT_EQ(b.text, "xx");
}

TEST(StopStringMatcherTest, HeldPrefixIsReleasedWhenItCannotMatch) {
  StopStringMatcher m({"STOP"}, false);
  auto u1 = m.feed("go ST");
  EXPECT_EQ(u1.text, "go ");
  EXPECT_EQ(m.held_bytes(), 2u);
  auto u2 = m.feed("ART");
  EXPECT_EQ(u2.text, "START");
  EXPECT_EQ(m.held_bytes(), 0u);
  auto u3 = m.feed(" STO");
  EXPECT_EQ(u3.text, " ");
  EXPECT_EQ(m.flush(), "STO");  // finished for another reason: nothing is lost
}

TEST(StopStringMatcherTest, OverlappingPrefixesAbAbc) {
  // "ab" completes before "abc" can: the output stops at "ab" in every split.
  for (const auto& chunks : std::vector<std::vector<std::string>>{
           {"xabc"}, {"xa", "bc"}, {"x", "a", "b", "c"}, {"xab", "c"}}) {
    Streamed s = stream({"abc", "ab"}, false, chunks);
    EXPECT_TRUE(s.stopped);
    EXPECT_EQ(s.text, "x");
    EXPECT_EQ(s.stop_index, 1);
    Streamed inc = stream({"abc", "ab"}, true, chunks);
    EXPECT_EQ(inc.text, "xab");
  }
  // "abc" alone is held while "ab" could still grow into it.
  StopStringMatcher m({"abc"}, false);
  EXPECT_EQ(m.feed("xab").text, "x");
  EXPECT_EQ(m.feed("d").text, "abd");
}

TEST(StopStringMatcherTest, EarliestCompletionWinsRegardlessOfListOrder) {
  for (const auto& stops :
       std::vector<std::vector<std::string>>{{"world", "o w"}, {"o w", "world"}}) {
    Streamed s = stream(stops, false, {"hello world"});
    EXPECT_EQ(s.text, "hell");
    EXPECT_EQ(stops[s.stop_index], "o w");
  }
  // Two strings ending at the same byte: the longer one is cut, so neither leaks.
  Streamed s = stream({"bc", "abc"}, false, {"xxabcyy"});
  EXPECT_EQ(s.text, "xx");
}

TEST(StopStringMatcherTest, IncludeStopStringReleasesEagerlyAndKeepsTheMatch) {
  StopStringMatcher m({"END"}, true);
  EXPECT_EQ(m.feed("the E").text, "the E");  // no hold-back: the stop string is output anyway
  auto u = m.feed("ND and more");
  EXPECT_TRUE(u.stopped);
  EXPECT_EQ(u.text, "ND");
}

TEST(StopStringMatcherTest, MultiByteUtf8) {
  // "é" is C3 A9; the chunk boundary falls inside it.
  Streamed s = stream({"\xC3\xA9"}, false, {"caf\xC3", "\xA9 ok"});
  EXPECT_EQ(s.text, "caf");
  EXPECT_TRUE(s.stopped);
  // "你好" (E4 BD A0 E5 A5 BD) split at every byte: stops before it.
  const std::string text = "说 \xE4\xBD\xA0\xE5\xA5\xBD!";
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  Streamed b = stream({"\xE4\xBD\xA0\xE5\xA5\xBD"}, false, bytes);
  EXPECT_EQ(b.text, "说 ");
  // Released text never ends inside a character, even without stop strings.
  StopStringMatcher m({}, false);
  EXPECT_EQ(m.feed("a\xE4\xBD").text, "a");
  EXPECT_EQ(m.feed("\xA0").text, "\xE4\xBD\xA0");
  // A stop string sharing a lead byte with the text does not cut a different character.
  Streamed d = stream({"\xE4\xBD\xA0"}, false, {"\xE4\xBD", "\xA1 z"});  // 你 vs 佡
  EXPECT_FALSE(d.stopped);
  EXPECT_EQ(d.text, "\xE4\xBD\xA1 z");
}

TEST(StopStringMatcherTest, CanStopFalseDefersMatchesButKeepsSpanningOnes) {
  // Before min_tokens a full stop string is ordinary text.
  StopStringMatcher m({"STOP"}, false);
  auto u1 = m.feed("a STOP b", /*can_stop=*/false);
  EXPECT_FALSE(u1.stopped);
  EXPECT_EQ(u1.text, "a STOP b");
  // A stop string that starts before and completes after min_tokens still stops.
  auto u2 = m.feed(" ST", false);
  EXPECT_EQ(u2.text, " ");
  auto u3 = m.feed("OP!", true);
  EXPECT_TRUE(u3.stopped);
  EXPECT_EQ(u3.text, "");
  // After a match nothing more comes out.
  EXPECT_EQ(m.feed("later").text, "");
  EXPECT_EQ(m.flush(), "");
}

// The final output of a whole text: cut at the first completed stop string.
std::string expected_output(const std::string& text, const std::vector<std::string>& stops,
                            bool include) {
  for (size_t end = 1; end <= text.size(); ++end) {
    size_t best_len = 0;
    for (const auto& s : stops) {
      if (s.size() <= end && text.compare(end - s.size(), s.size(), s) == 0) {
        best_len = std::max(best_len, s.size());
      }
    }
    if (best_len > 0) return text.substr(0, include ? end : end - best_len);
  }
  return text;
}

TEST(StopStringMatcherTest, RandomSplitsMatchTheWholeTextAnswerAndNeverLeak) {
  Rng rng(2718);
  const std::string alphabet = "abc ";
  for (int trial = 0; trial < 3000; ++trial) {
    std::string text;
    const int len = 1 + static_cast<int>(rng.below(30));
    for (int i = 0; i < len; ++i) text += alphabet[rng.below(alphabet.size())];
    std::vector<std::string> stops;
    const int num_stops = 1 + static_cast<int>(rng.below(3));
    for (int k = 0; k < num_stops; ++k) {
      std::string s;
      const int slen = 1 + static_cast<int>(rng.below(4));
      for (int i = 0; i < slen; ++i) s += alphabet[rng.below(3)];
      stops.push_back(s);
    }
    const bool include = rng.below(2) == 0;
    const std::string want = expected_output(text, stops, include);

    StopStringMatcher m(stops, include);
    std::string got;
    size_t pos = 0;
    bool stopped = false;
    while (pos < text.size() && !stopped) {
      const size_t n = 1 + rng.below(5);
      auto u = m.feed(std::string_view(text).substr(pos, n));
      pos += n;
      got += u.text;
      stopped = u.stopped;
      // Released text is always a prefix of the final answer: nothing is ever taken back.
      ASSERT_EQ(want.compare(0, got.size(), got), 0)
          << "leaked '" << got << "' text '" << text << "' trial " << trial;
    }
    if (!stopped) got += m.flush();
    ASSERT_EQ(got, want) << "text '" << text << "' include " << include << " trial " << trial;
  }
}

}  // namespace
}  // namespace strata::sampling
