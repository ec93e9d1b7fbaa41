#include "core/store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <future>

#include "core/base/files.h"
#include "core/error.h"
#include "core/run_dir/events_file.h"
#include "core/runtime.h"
#include "tests/common/test_dir.h"

namespace dlaunch::core {
namespace {

using std::chrono::milliseconds;

TEST(MemoryStoreTest, SetGetAddWait) {
  auto s = MakeMemoryStore();
  auto later = std::async(std::launch::async, [&] { return s->Get("a", milliseconds(5000)); });
  s->Set("a", "1");
  EXPECT_EQ(later.get(), "1");
  EXPECT_EQ(s->Add("c", 5), 5);
  EXPECT_EQ(s->Add("c", -2), 3);
  EXPECT_TRUE(s->Check("c"));
  try {
    s->Wait({"a", "missing"}, milliseconds(50));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kTimeout);
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos);
  }
}

TEST(PrefixStoreTest, KeepsUsersApart) {
  auto base = MakeMemoryStore();
  auto a = MakePrefixStore("a/", base), b = MakePrefixStore("b/", base);
  a->Set("k", "x");
  EXPECT_FALSE(b->Check("k"));
  EXPECT_EQ(base->Get("a/k", milliseconds(0)), "x");
}

TEST(RuntimeTest, WorldOfOneWithoutALauncher) {
  ::unsetenv("DLAUNCH_COORDINATOR");
  ::unsetenv("WORLD_SIZE");
  ::unsetenv("DLAUNCH_RANK_DIR");
  auto rt = Runtime::FromEnv();
  EXPECT_EQ(rt->rank(), 0);
  EXPECT_EQ(rt->world_size(), 1);
  rt->store()->Set("k", "v");
  EXPECT_EQ(rt->store()->Get("k", milliseconds(0)), "v");
  rt->UpdateStatus([](RankStatus& s) { s.step = 7; });
  EXPECT_EQ(rt->status().step, 7);
}

TEST(RuntimeTest, WorldSizeWithoutCoordinatorIsAnError) {
  ::unsetenv("DLAUNCH_COORDINATOR");
  ::setenv("WORLD_SIZE", "4", 1);
  EXPECT_THROW(Runtime::FromEnv(), Error);
  ::unsetenv("WORLD_SIZE");
}

TEST(EventLogTest, OneFlushedLinePerEvent) {
  const dlaunch::testing::TestDir test_dir("events");
  const std::string path = test_dir.string() + "/events.jsonl";
  {
    rundir::EventLog log(path);
    log.Append(0, "a", nlohmann::json::object());
    // Readable before the log is closed: nothing is buffered in the process.
    std::ifstream in(path);
    std::string line;
    ASSERT_TRUE(std::getline(in, line));
    EXPECT_EQ(nlohmann::json::parse(line)["kind"], "a");
  }
}

}  // namespace
}  // namespace dlaunch::core
