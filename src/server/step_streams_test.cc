#include "server/step_streams.h"

#include <gtest/gtest.h>

namespace hachi::server {
namespace {

const state::StepKey kKey{12, 1000, 0};

api::StepReport Report(int64_t seq, std::vector<api::OutputChunk> chunks,
                       std::vector<api::TaskExit> exits = {}, bool done = false) {
  api::StepReport r;
  r.job = kKey.job;
  r.job_start = kKey.job_start;
  r.step = kKey.step;
  r.seq = seq;
  r.chunks = std::move(chunks);
  r.exits = std::move(exits);
  r.done = done;
  return r;
}

api::OutputChunk Out(int task, std::string data, int fd = 1) {
  return api::OutputChunk{task, fd, std::move(data), 0};
}

std::string Text(const StepStreams::Read& r) {
  std::string s;
  for (const api::OutputChunk& c : r.chunks) s += c.data;
  return s;
}

TEST(StepStreams, MergesNodesAndTakesARepeatedBatchOnce) {
  StepStreams s;
  s.Open(kKey, {"a", "b"}, false);
  EXPECT_EQ(s.Add(kKey, "a", Report(0, {Out(0, "hello ")}), {}).next, 6);
  EXPECT_EQ(s.Add(kKey, "b", Report(0, {Out(1, "world")}), {}).next, 5);
  // Node a's batch again (its answer was lost), with more after it.
  EXPECT_EQ(s.Add(kKey, "a", Report(0, {Out(0, "hello "), Out(0, "again")}), {}).next,
            11);
  StepStreams::Read r = s.ReadFrom(kKey, 0, 1 << 20);
  EXPECT_EQ(Text(r), "hello worldagain");
  EXPECT_EQ(r.next, 16);
  // From the middle of a chunk: its tail.
  EXPECT_EQ(Text(s.ReadFrom(kKey, 8, 1 << 20)), "rldagain");
}

TEST(StepStreams, DoneWhenEveryNodeIsAndExitsByRank) {
  StepStreams s;
  s.Open(kKey, {"a", "b"}, true);
  api::TaskExit ok{0, api::ExitKind::kExited, 0, 0, "", ""};
  api::TaskExit bad{1, api::ExitKind::kExited, 3, 0, "", ""};
  StepStreams::Added a = s.Add(kKey, "a", Report(0, {}, {ok}, true), {});
  EXPECT_FALSE(a.all_done);
  EXPECT_FALSE(a.bad_exit);
  StepStreams::Added b = s.Add(kKey, "b", Report(0, {}, {bad}, true), {});
  EXPECT_TRUE(b.all_done);
  EXPECT_TRUE(b.bad_exit);
  EXPECT_TRUE(b.kill_on_bad_exit);
  // Reported again: neither is news.
  StepStreams::Added again = s.Add(kKey, "b", Report(0, {}, {bad}, true), {});
  EXPECT_FALSE(again.all_done);
  EXPECT_FALSE(again.bad_exit);
  std::vector<api::TaskExit> exits = s.Exits(kKey);
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[1].exit_code, 3);
  EXPECT_EQ(exits[1].node, "b");
}

TEST(StepStreams, BoundedWhileNobodyReadsByTakingNoMore) {
  StepStreams s(/*max_held=*/10);
  s.Open(kKey, {"a"}, false);
  // Below the bound a chunk is taken whole (the bound is passed by one chunk at most);
  // at the bound nothing more, and the node is not done until all of it was taken.
  EXPECT_EQ(s.Add(kKey, "a", Report(0, {Out(0, "01234567"), Out(0, "89ab")}), {}).next,
            12);
  api::TaskExit ok{0, api::ExitKind::kExited, 0, 0, "", ""};
  StepStreams::Added held =
      s.Add(kKey, "a", Report(12, {Out(0, "cdef")}, {ok}, true), {});
  EXPECT_EQ(held.next, 12);
  EXPECT_FALSE(held.all_done);
  EXPECT_EQ(s.Exits(kKey).size(), 1u);  // exits are taken all the same
  // The reader reads; what it has is dropped when it asks from past it, which makes room.
  StepStreams::Read r = s.ReadFrom(kKey, 0, 1 << 20);
  EXPECT_EQ(r.lost, 0);
  EXPECT_EQ(Text(r), "0123456789ab");
  s.ReadFrom(kKey, r.next, 1 << 20);
  StepStreams::Added taken =
      s.Add(kKey, "a", Report(12, {Out(0, "cdef")}, {ok}, true), {});
  EXPECT_EQ(taken.next, 16);
  EXPECT_TRUE(taken.all_done);
  EXPECT_EQ(Text(s.ReadFrom(kKey, 12, 1 << 20)), "cdef");
}

TEST(StepStreams, AnEndedStepsLastWordPastTheBoundIsMarkedLost) {
  StepStreams s(/*max_held=*/4);
  s.Open(kKey, {"a"}, false);
  s.Add(kKey, "a", Report(0, {Out(0, "0123")}), {});
  // The step ended (the job's end): its agent drops what it has once told, so what does
  // not fit is a gap the reader is told of, not an offset the agent never sends again.
  EXPECT_EQ(s.Add(kKey, "a", Report(4, {Out(0, "4567")}), {}, /*last_word=*/true).next,
            8);
  StepStreams::Read r = s.ReadFrom(kKey, 0, 1 << 20);
  ASSERT_EQ(r.chunks.size(), 2u);
  EXPECT_EQ(r.chunks[0].data, "0123");
  EXPECT_EQ(r.chunks[1].lost, 4);
  EXPECT_EQ(r.next, 8);
}

// A job's steps together hold at most max_held_per_job unread bytes: past it no step of
// the job takes more (others' jobs do), a new step is refused naming the bound, and a
// reader's read or an ended stream's sweep makes room again.
TEST(StepStreams, AJobsStepsTogetherAreBounded) {
  StepStreams s(/*max_held=*/100, RealClock(), /*max_held_per_job=*/25);
  auto report = [](state::StepKey key, int64_t seq, std::string data) {
    api::StepReport r = Report(seq, {Out(0, std::move(data))});
    r.job = key.job;
    r.step = key.step;
    return r;
  };
  std::vector<state::StepKey> steps;
  for (int i = 0; i < 3; ++i) steps.push_back({12, 1000, i});
  for (const state::StepKey& k : steps) {
    s.Open(k, {"a"}, false);
    EXPECT_EQ(s.Add(k, "a", report(k, 0, "0123456789"), {}).next, 10) << k.step;
  }
  // 30 held, past the job's 25: the job's steps take no more; another job's do.
  EXPECT_EQ(s.Add(steps[0], "a", report(steps[0], 10, "x"), {}).next, 10);
  const state::StepKey other{13, 1000, 0};
  s.Open(other, {"a"}, false);
  EXPECT_EQ(s.Add(other, "a", report(other, 0, "0123456789"), {}).next, 10);
  EXPECT_TRUE(s.RoomForStep(13).ok());
  const Status refused = s.RoomForStep(12);
  EXPECT_EQ(refused.code(), StatusCode::kBusy);
  EXPECT_EQ(refused.message(),
            "job 12's steps hold 30 bytes of output that their sruns have not read, and "
            "the server holds at most 25 for one job's steps; let them read it, or "
            "cancel those steps, before starting another");
  // Step 2 ends and its reader got it all: swept, 20 held.
  s.End(steps[2]);
  s.Delivered(steps[2]);
  s.Sweep(std::chrono::hours(1));
  EXPECT_TRUE(s.RoomForStep(12).ok());
  EXPECT_EQ(s.Add(steps[0], "a", report(steps[0], 10, "vwxyz"), {}).next, 15);
  EXPECT_FALSE(s.RoomForStep(12).ok()) << "25: at the bound again";
  // Step 1's reader reads it all: 15 held.
  s.ReadFrom(steps[1], 10, 1 << 20);
  EXPECT_TRUE(s.RoomForStep(12).ok());
  EXPECT_EQ(s.Add(steps[0], "a", report(steps[0], 15, "!"), {}).next, 16);
}

TEST(StepStreams, AReaderThatAsksFromBelowWhatWasDroppedSeesItLost) {
  StepStreams s;
  s.Open(kKey, {"a"}, false);
  s.Add(kKey, "a", Report(0, {Out(0, "0123456789")}), {});
  s.Add(kKey, "a", Report(10, {Out(0, "abcdef")}), {});
  EXPECT_EQ(s.ReadFrom(kKey, 10, 1 << 20).lost, 0);  // its reader had the first ten
  // A second reader from the start (another srun on the same step).
  StepStreams::Read r = s.ReadFrom(kKey, 0, 1 << 20);
  EXPECT_EQ(r.lost, 10);
  EXPECT_EQ(r.from, 10);
  EXPECT_EQ(Text(r), "abcdef");
  // What the reader has is dropped when it asks from past it; asked again it is gone.
  StepStreams::Read later = s.ReadFrom(kKey, 16, 1 << 20);
  EXPECT_TRUE(later.chunks.empty());
  EXPECT_EQ(later.next, 16);
}

// sattach beside srun: the observer takes nothing from srun and sees the tail srun has
// read; a long past beyond the tail is lost to it, never to srun.
TEST(StepStreams, AnObserverReadsBesideTheReaderAndTakesNothing) {
  StepStreams s;
  s.Open(kKey, {"a"}, false);
  s.Add(kKey, "a", Report(0, {Out(0, "one "), Out(0, "two ")}), {});
  StepStreams::Read srun = s.ReadFrom(kKey, 0, 1 << 20);
  EXPECT_EQ(Text(srun), "one two ");
  s.Add(kKey, "a", Report(8, {Out(0, "three")}), {});
  // The observer attaches: srun's read tail, then what srun has not read.
  StepStreams::Read seen = s.ReadFrom(kKey, 0, 1 << 20, /*observe=*/true);
  EXPECT_EQ(Text(seen), "one two three");
  EXPECT_EQ(seen.lost, 0);
  EXPECT_EQ(seen.next, 13);
  // srun still gets all of what it had not read.
  srun = s.ReadFrom(kKey, srun.next, 1 << 20);
  EXPECT_EQ(Text(srun), "three");
  EXPECT_EQ(srun.lost, 0);
  // Past the tail's bound, the oldest of what srun read is gone for observers.
  const std::string big(StepStreams::kObserverTail, 'x');
  s.Add(kKey, "a", Report(13, {Out(0, big)}), {});
  srun = s.ReadFrom(kKey, srun.next, 1 << 20);
  s.ReadFrom(kKey, srun.next, 1 << 20);  // srun reads on: all it had is dropped
  seen = s.ReadFrom(kKey, 0, 1 << 20, /*observe=*/true);
  EXPECT_EQ(seen.lost, 13);
  EXPECT_EQ(Text(seen), big);
}

TEST(StepStreams, AReaderThatReconnectsGetsWhatIsStillHeld) {
  StepStreams s;
  s.Open(kKey, {"a"}, false);
  s.Add(kKey, "a", Report(0, {Out(0, "line1\n")}), {});
  StepStreams::Read first = s.ReadFrom(kKey, 0, 1 << 20);
  EXPECT_EQ(Text(first), "line1\n");
  s.Add(kKey, "a", Report(6, {Out(0, "line2\n")}), {});
  // The reader lost the answer to its next request and asks from the same place.
  EXPECT_EQ(Text(s.ReadFrom(kKey, 6, 1 << 20)), "line2\n");
  EXPECT_EQ(Text(s.ReadFrom(kKey, 6, 1 << 20)), "line2\n");
}

TEST(StepStreams, AGapFromAnEarlierServerAndAgentLossesAreMarked) {
  StepStreams s;
  // A restarted server learns of the step from a report that starts at 100.
  s.Add(kKey, "a", Report(100, {Out(0, "x")}), {"a"});
  StepStreams::Read r = s.ReadFrom(kKey, 0, 1 << 20);
  ASSERT_EQ(r.chunks.size(), 2u);
  EXPECT_EQ(r.chunks[0].lost, 100);
  EXPECT_EQ(r.chunks[1].data, "x");
}

// An ended step's stream says how long ago it ended (the reader waits that long at most
// for a node that never says its last word); a last word makes its node done.
TEST(StepStreams, AnEndedStreamSaysSinceWhenAndALastWordEndsItsNode) {
  FakeClock clock;
  StepStreams s(StepStreams::kMaxHeld, &clock);
  const state::StepKey k{1, 100, 0};
  s.Open(k, {"n1", "n2"}, false);
  s.End(k);
  clock.Advance(std::chrono::seconds(3));
  StepStreams::Read r = s.ReadFrom(k, 0, 1 << 20);
  EXPECT_TRUE(r.ended);
  EXPECT_EQ(r.ended_for, std::chrono::seconds(3));
  EXPECT_FALSE(r.all_done);
  api::StepReport late;
  late.job = 1;
  late.job_start = 100;
  late.chunks.push_back({0, 1, "bye\n", 0});
  s.Add(k, "n1", late, {}, /*last_word=*/true);
  s.Add(k, "n2", api::StepReport{}, {}, /*last_word=*/true);
  r = s.ReadFrom(k, 0, 1 << 20);
  EXPECT_TRUE(r.all_done);
  ASSERT_EQ(r.chunks.size(), 1u);
  EXPECT_EQ(r.chunks[0].data, "bye\n");
}

TEST(StepStreams, EndedStreamsAreSwept) {
  StepStreams s;
  s.Open(kKey, {"a"}, false);
  s.Add(kKey, "a", Report(0, {Out(0, "abc")}), {});
  s.End(kKey);
  s.Sweep(std::chrono::hours(1));
  EXPECT_EQ(s.size(), 1u);  // not read yet
  s.ReadFrom(kKey, 3, 1 << 20);
  s.Sweep(std::chrono::hours(1));
  EXPECT_EQ(s.size(), 1u);  // read, but its reader was not told it is done
  s.Delivered(kKey);
  s.Sweep(std::chrono::hours(1));
  EXPECT_EQ(s.size(), 0u);
}

// A reader that never comes: the ended stream goes once `keep_for` passed on the Clock.
TEST(StepStreams, AnUnreadEndedStreamGoesAfterKeepFor) {
  FakeClock clock;
  StepStreams s(8 << 20, &clock);
  s.Open(kKey, {"a"}, false);
  s.Add(kKey, "a", Report(0, {Out(0, "abc")}), {});
  s.End(kKey);
  clock.Advance(std::chrono::minutes(2));
  s.Sweep(std::chrono::minutes(2));
  EXPECT_EQ(s.size(), 1u);  // exactly keep_for: kept
  clock.Advance(std::chrono::seconds(1));
  s.Sweep(std::chrono::minutes(2));
  EXPECT_EQ(s.size(), 0u);
}

}  // namespace
}  // namespace hachi::server
