import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// The test clock and the recording HTTP double do what the other tests rely on.
@Suite(.timeLimit(.minutes(1)))
struct TestSupportTests {
    @Test func theClockWakesSleepersInDeadlineOrderOnlyWhenAdvanced() async throws {
        let clock = TestClock()
        let woken = Watched<[Int]>([])
        let sleepers = [3, 1, 2].map { seconds in
            Task {
                try await clock.sleep(for: .seconds(seconds))
                woken.update { $0.append(seconds) }
            }
        }
        await clock.waitForSleepers(3)
        #expect(clock.pendingSleeps == [.seconds(1), .seconds(2), .seconds(3)])
        clock.advance(by: .milliseconds(999))
        #expect(clock.sleeperCount == 3, "no deadline has come")
        clock.advance(by: .milliseconds(1))
        await woken.wait(until: { $0 == [1] }, "the 1 s sleeper")
        await clock.run()
        await woken.wait(until: { $0.count == 3 }, "every sleeper")
        #expect(woken.value == [1, 2, 3])
        #expect(clock.now.offset == .seconds(3), "run() stops at the last deadline")
        #expect(clock.sleepsStarted == 3)
        for sleeper in sleepers { try await sleeper.value }
        clock.expectNoPendingSleeps()
    }

    @Test func aCancelledSleeperLeavesAndASleepLeftPendingIsReported() async {
        let clock = TestClock()
        let sleeper = Task { try await clock.sleep(for: .seconds(1)) }
        await clock.waitForSleepers(1)
        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        #expect(clock.sleeperCount == 0)

        let forgotten = Task { try await clock.sleep(for: .seconds(5)) }
        await clock.waitForSleepers(1)
        withKnownIssue("a sleep left pending is an issue of the test") {
            clock.expectNoPendingSleeps()
        }
        forgotten.cancel()
    }

    @Test func theDoubleAnswersFromItsScriptAndRecordsEachRequest() async throws {
        let http = RecordingHTTP()
        let url = "http://host.test/a"
        http.script(url, .status(503), .respond(status: 200, headers: ["ETag": "\"x\""], body: [1, 2, 3]))
        let store = try OutputStore(root: TemporaryFolder().path)
        func fetch(_ url: String, headers: [(name: String, value: String)] = []) async throws -> (FetchResponseHead, [UInt8]) {
            let payload = Payload(store: store, folder: "", maxBytes: 100)
            defer { payload.discard() }
            let head = try await http.fetch(FetchRequest(url: URL(string: url)!, headers: headers, maxBytes: 100), into: payload)
            return (head, try payload.bytes())
        }

        #expect(try await fetch(url).0.status == 503)
        let (head, body) = try await fetch(url, headers: [("If-None-Match", "\"w\"")])
        #expect(head.status == 200)
        #expect(head.headers["etag"] == "\"x\"", "header names in lower case, as the real clients give them")
        #expect(body == [1, 2, 3])
        #expect(try await fetch(url).0.status == 200, "the last reply repeats")
        #expect(try await fetch("http://host.test/unscripted").0.status == 404)
        #expect(http.requests.count == 4)
        #expect(http.requests(to: url).count == 3)
        #expect(http.requests[1].header("if-none-match") == "\"w\"")
    }

    @Test func aHangingReplyEndsOnlyWhenCancelled() async {
        let http = RecordingHTTP()
        http.script("http://host.test/hang", .hang)
        let fetch = Task {
            let payload = Payload(store: try OutputStore(root: TemporaryFolder().path), folder: "", maxBytes: 100)
            defer { payload.discard() }
            return try await http.fetch(FetchRequest(url: URL(string: "http://host.test/hang")!, maxBytes: 100), into: payload)
        }
        await http.waitForRequests(1)
        #expect(http.events.count == 1, "started, and nothing more")
        fetch.cancel()
        await #expect(throws: CancellationError.self) { try await fetch.value }
        await http.waitForCancelled(1)
    }

    /// A child started from a thread that blocks SIGTERM and SIGHUP (as the engine's threads do)
    /// starts with nothing blocked, hears SIGTERM, and takes what it started with it.
    @Test func aChildProcessStartsWithNoSignalBlockedAndEndsWithItsGroup() async throws {
        var blocked = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGTERM)
        sigaddset(&blocked, SIGHUP)
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &blocked, &previous)
        let child: ChildProcess
        do {
            defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
            child = try ChildProcess(
                "/bin/sh", ["-c", "sleep 60 & echo $!; grep '^SigBlk' /proc/self/status; wait"], stdout: .pipe)
        }
        var text = ""
        while text.split(separator: "\n").count < 2 {
            let chunk = child.output!.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        let lines = text.split(separator: "\n")
        #expect(lines.count == 2, "\(text)")
        #expect(lines.last?.hasSuffix("0000000000000000") == true, "the child's mask: \(text)")
        let sleeper = try #require(lines.first.flatMap { pid_t($0) })
        child.terminate()
        #expect(!child.isRunning)
        #expect(child.endedBySignal && child.terminationStatus == SIGTERM, "SIGTERM ended it: \(child.terminationStatus)")
        // The sleep it started is gone with its group (killed, then reaped by init).
        var gone = false
        for _ in 0..<200 where !gone {
            let state = (try? String(contentsOfFile: "/proc/\(sleeper)/stat", encoding: .utf8))?.split(separator: " ").dropFirst(2).first
            gone = state == nil || state == "Z"
            if !gone { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(gone, "sleep \(sleeper) outlived the group")
    }
}
