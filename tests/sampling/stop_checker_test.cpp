#include <gtest/gtest.h>

#include "sampling/stop_checker.h"

namespace pypto {
namespace {

TEST(StopChecker, NoStopsReleasesEverything) {
  StopChecker c({});
  EXPECT_EQ(c.append("hello").text, "hello");
  EXPECT_EQ(c.flush(), "");
}

TEST(StopChecker, StopAcrossTokenBoundariesIsTrimmed) {
  StopChecker c({"END"});
  auto r = c.append("abc E");
  EXPECT_EQ(r.text, "abc ");  // "E" could start "END": held back
  EXPECT_FALSE(r.stopped());
  EXPECT_EQ(c.held_back(), 1u);
  r = c.append("N");
  EXPECT_EQ(r.text, "");
  r = c.append("Dxyz");
  EXPECT_TRUE(r.stopped());
  EXPECT_EQ(*r.stop_index, 0u);
  EXPECT_EQ(r.text, "");  // the stop string and what follows are dropped
  EXPECT_EQ(c.append("more").text, "");
  EXPECT_EQ(c.flush(), "");
}

TEST(StopChecker, StopInTheMiddleOfAStep) {
  // A stop that is not at the end of the text after the step (missed by `endswith`).
  StopChecker c({"\n\n"});
  const auto r = c.append("line one\n\nline two");
  EXPECT_TRUE(r.stopped());
  EXPECT_EQ(r.text, "line one");
}

TEST(StopChecker, FalseStartIsReleased) {
  StopChecker c({"END"});
  EXPECT_EQ(c.append("EN").text, "");
  EXPECT_EQ(c.append("X").text, "ENX");
  EXPECT_EQ(c.append("E").text, "");
  EXPECT_EQ(c.flush(), "E");
}

TEST(StopChecker, EarliestStopWins) {
  StopChecker c({"cd", "bc"});
  const auto r = c.append("abcd");
  EXPECT_EQ(*r.stop_index, 1u);
  EXPECT_EQ(r.text, "a");
}

TEST(StopChecker, Utf8StopString) {
  StopChecker c({"。"});  // 3 bytes in UTF-8
  EXPECT_EQ(c.append("你好").text, "你好");
  const auto r = c.append("。再见");
  EXPECT_TRUE(r.stopped());
  EXPECT_EQ(r.text, "");
}

}  // namespace
}  // namespace pypto
