import Foundation
import RunnerKit
import Testing

@testable import runner

/// What `runner run` prints for people: the progress line and the closing table.
struct RunReporterTests {
    @Test func theProgressLinePromisesNoTimeWhileJobsWaitToRetry() {
        let calm = RunReporter.progressLine(done: 40, of: 100, children: 0, failed: 0, retrying: 0, elapsed: .seconds(2))
        #expect(calm == "  40 of 100 jobs done, 0 not ok, 20 jobs/s, about 3 s left")
        let retrying = RunReporter.progressLine(done: 99, of: 100, children: 3, failed: 0, retrying: 1, elapsed: .seconds(1))
        #expect(retrying == "  99 of 100 jobs done (+3 children), 0 not ok, 99 jobs/s, 1 retrying")
        let large = RunReporter.progressLine(done: 0, of: 1, children: 0, failed: 0, retrying: 0, elapsed: .seconds(4), bytes: 200 << 20)
        #expect(large == "  0 of 1 jobs done, 0 not ok, 0 jobs/s, 50 MiB/s", "the bytes a second of the run")
    }

    @Test func theLivePageShowsARunningTransfersBytesTotalAndSpeed() {
        #expect(LivePage.transfer(bytes: 120 << 20, total: 1 << 30, speed: Double(48 << 20)) == "120 MiB of 1024 MiB, 48 MiB/s")
        #expect(LivePage.transfer(bytes: 5000, total: nil, speed: nil) == "5000 bytes", "no total announced, no speed yet")
    }

    static func result(_ key: String, ms: Int, waited: Int = 0, attempts: Int = 1) -> JobResult {
        var result = JobResult(
            key: key, kind: "entry", status: .succeeded, httpStatus: 200, bytes: 10, attempts: attempts, durationMs: ms,
            startedAt: Date(), finishedAt: Date())
        result.waitedForHostMs = waited
        return result
    }

    @Test func theTableShowsOwnTimeAndWaitsAndTriesOnlyWhenSomeRowHasThem() {
        let plain = RunReporter.table([Self.result("a", ms: 120)])
        #expect(plain.split(separator: "\n").first == "STATUS       KEY                                           HTTP     BYTES     MS NOTE")
        #expect(plain.split(separator: "\n").last?.hasSuffix("200        10    120") == true, "\(plain)")

        let busy = RunReporter.table([Self.result("a", ms: 1300, waited: 1000, attempts: 3), Self.result("b", ms: 100)])
        let lines = busy.split(separator: "\n").map { $0.split(separator: " ") }
        #expect(lines[0] == ["STATUS", "KEY", "HTTP", "BYTES", "MS", "WAIT", "TRIES", "NOTE"])
        #expect(lines[1] == ["succeeded", "a", "200", "10", "300", "1000", "3"], "own time 1300 - 1000 ms")
        #expect(lines[2] == ["succeeded", "b", "200", "10", "100", "0", "1"])
    }

    @Test func aRecordNamesItsHostWaitsOnlyWhenThereWereAny() {
        #expect(Self.result("a", ms: 5).json["waitedForHostMs"] == nil)
        #expect(Self.result("a", ms: 5, waited: 7).json["waitedForHostMs"]?.intValue == 7)
        #expect(Self.result("a", ms: 5, waited: 7).ownMs == 0)
    }
}

/// The NOTE of a record that went on from a cut transfer's kept bytes.
struct ResumedNoteTests {
    @Test func aResumedRecordsNoteSaysFromHowManyBytes() {
        var result = RunReporterTests.result("file:big", ms: 10)
        #expect(RunReporter.note(result) == "", "nothing resumed, nothing said")
        result.resumedFrom = 45_822_771
        #expect(RunReporter.note(result) == "resumed from 43.7 MiB")
        result.details = [("id", .string("x"))]
        #expect(RunReporter.note(result) == "resumed from 43.7 MiB; id x")
        result.resumedFrom = 0
        #expect(RunReporter.note(result) == "id x", "a transfer that started over resumed nothing")
        #expect(RunReporter.binarySize(512) == "512 bytes" && RunReporter.binarySize(3584) == "3.5 KiB")
        #expect(RunReporter.binarySize(3 << 30) == "3.0 GiB")
        let table = RunReporter.table([{ var r = result; r.resumedFrom = 2_000_000; return r }()])
        #expect(table.contains("resumed from 1.9 MiB; id x"), "\(table)")
    }
}
