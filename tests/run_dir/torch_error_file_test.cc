// torch_error.json as torch's @record writes it, as a program that follows torchelastic's
// contract writes it, and as nothing should be read: a FIFO, a file past the bound, not JSON.
#include "core/run_dir/torch_error_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "core/run_dir/error_file.h"
#include "tests/common/test_dir.h"

namespace dlaunch::rundir {
namespace {

TEST(TorchErrorFileTest, RecordsMessageTracebackAndTimeAsTorchWritesThem) {
  const testing::TestDir tmp("torch_error");
  const std::string path = (tmp.path() / "torch_error.json").string();
  std::ofstream(path) << R"({"message": {"message": "ValueError: boom", "extraInfo": {
      "py_callstack": "Traceback (most recent call last):\n  File \"t.py\", line 3\nValueError: boom\n",
      "timestamp": "1700000000"}}})";
  const std::optional<TorchError> e = ReadTorchError(path);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->path, path);
  EXPECT_EQ(e->message, "ValueError: boom");
  EXPECT_EQ(e->traceback,
            "Traceback (most recent call last):\n  File \"t.py\", line 3\nValueError: boom\n");
  EXPECT_EQ(e->timestamp, 1700000000);

  std::ofstream(path) << R"({"message": "the data shard is gone"})";
  ASSERT_TRUE(ReadTorchError(path).has_value());
  EXPECT_EQ(ReadTorchError(path)->message, "the data shard is gone");
  EXPECT_EQ(ReadTorchError(path)->traceback, "");
}

TEST(TorchErrorFileTest, WhatIsNotTorchsFormatIsNoError) {
  const testing::TestDir tmp("torch_error_bad");
  const std::string path = (tmp.path() / "torch_error.json").string();
  EXPECT_FALSE(ReadTorchError(path).has_value());  // absent
  std::ofstream(path) << "not json";
  EXPECT_FALSE(ReadTorchError(path).has_value());
  std::ofstream(path) << R"({"error": "no message key"})";
  EXPECT_FALSE(ReadTorchError(path).has_value());
  std::ofstream(path) << R"({"message": 7})";
  EXPECT_FALSE(ReadTorchError(path).has_value());
  std::ofstream(path) << std::string(kMaxErrorBytes + 1, ' ');
  EXPECT_FALSE(ReadTorchError(path).has_value());  // past the bound: not read at all
  const std::string fifo = (tmp.path() / "fifo.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(ReadTorchError(fifo).has_value());  // never waits for a writer
}

}  // namespace
}  // namespace dlaunch::rundir
