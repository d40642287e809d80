import FixtureServer
import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

/// `--rate` end to end: the real binary against the FixtureServer, judged by the server's own
/// arrival times.
@Suite(.measuresRealTime, .serialized, .timeLimit(.minutes(3)))
struct RateTests {
    /// The most requests that arrived within any one second [t, t + 1).
    static func busiestSecond(_ arrivals: [ContinuousClock.Instant]) -> Int {
        let sorted = arrivals.sorted()
        var most = 0
        var end = 0
        for start in sorted.indices {
            while end < sorted.count, sorted[start].duration(to: sorted[end]) < .seconds(1) { end += 1 }
            most = max(most, end - start)
        }
        return most
    }

    /// With a bucket of one token, a second holds at most `rate` requests plus the one whose
    /// token was already there when the second began; and one more, sent before that second,
    /// that a loaded machine delivered late.
    static func allowed(rate: Int) -> Int { rate + 2 }

    /// From `start`, taken before the run, to the last arrival: every token is taken after
    /// `start`, so a first request that arrived late cannot shorten it.
    static func span(since start: ContinuousClock.Instant, _ arrivals: [ContinuousClock.Instant]) -> Duration {
        guard let last = arrivals.max() else { return .zero }
        return start.duration(to: last)
    }

    private func imageJobs(_ w: Workspace, _ count: Int, prefix: String) -> String {
        (1...count).map { #"{"kind": "image", "key": "\#(prefix):\#($0)", "url": "\#(w.base)/images/png.png?n=\#(prefix)\#($0)"}"# }
            .joined(separator: "\n")
    }

    @Test func aRunAtRate5SpacesItsRequestsAndEveryJobMakesItsDeadline() async throws {
        let w = try Workspace()
        w.write("jobs.jsonl", imageJobs(w, 20, prefix: "paced"))
        // 20 jobs, 8 at once, 8 per host: most of them wait for their token far longer than
        // their 2 s deadline, which that wait does not touch.
        let started = ContinuousClock.now
        let run = try await w.run(["run", "jobs.jsonl", "--rate", "5", "--json"])
        #expect(run.status == 0, "stderr: \(run.stderr)")
        for n in 1...20 { #expect(try w.status("paced:\(n)") == "succeeded") }

        let arrivals = w.server.arrivals(pathPrefix: "/images/")
        #expect(arrivals.count == 20)
        let busiest = Self.busiestSecond(arrivals)
        #expect(busiest <= Self.allowed(rate: 5), "\(busiest) requests within one second")
        let span = Self.span(since: started, arrivals)
        #expect(span >= .milliseconds(3750), "20 requests 200 ms apart take 3.8 s: \(span)")
        #expect(run.stderr.contains("runner: Jobs waited ") && run.stderr.contains("for their turn at a paced host (most for 127.0.0.1, 5 requests/s)"),
            "the summary names the pace, not --per-host: \(run.stderr)")
        #expect(!run.stderr.contains("--per-host 8 held them back"), "\(run.stderr)")
    }

    @Test func aHostsRateInTheConfigOverridesRate() async throws {
        let w = try Workspace()
        w.write("jobs.jsonl", imageJobs(w, 10, prefix: "config"))
        // The host's own rate (4/s) wins over --rate 50, and its perHost of 1 holds too.
        w.write("config.json", #"{"hosts": {"127.0.0.1": {"rate": 4, "perHost": 1}}}"#)
        let started = ContinuousClock.now
        let run = try await w.run(["run", "jobs.jsonl", "--config", "config.json", "--rate", "50", "--json"])
        #expect(run.status == 0, "stderr: \(run.stderr)")
        let arrivals = w.server.arrivals(pathPrefix: "/images/")
        #expect(arrivals.count == 10)
        #expect(Self.busiestSecond(arrivals) <= Self.allowed(rate: 4))
        let span = Self.span(since: started, arrivals)
        #expect(span >= .milliseconds(2200), "10 requests 250 ms apart take 2.25 s (at --rate 50, 0.18 s): \(span)")
    }

    @Test func unpacedTheSameJobsArriveAtOnce() async throws {
        let w = try Workspace()
        w.write("jobs.jsonl", imageJobs(w, 20, prefix: "free"))
        let run = try await w.run(["run", "jobs.jsonl", "--json"])
        #expect(run.status == 0, "stderr: \(run.stderr)")
        #expect(Self.busiestSecond(w.server.arrivals(pathPrefix: "/images/")) > Self.allowed(rate: 5), "the check above can fail")
    }

    @Test func childrenShareTheirHostsBucket() async throws {
        let w = try Workspace()
        w.write("list.json", #"{"kind": "image-list", "key": "list", "url": "\#(w.base)/list/15?image=child"}"#)
        let started = ContinuousClock.now
        let run = try await w.run(["run", "list.json", "--rate", "4", "--json"])
        #expect(run.status == 0, "stderr: \(run.stderr)")
        #expect(try w.status("list") == "succeeded")
        let arrivals = w.server.arrivals(pathPrefix: "/")
        #expect(arrivals.count == 16, "the list and its 15 images")
        let busiest = Self.busiestSecond(arrivals)
        #expect(busiest <= Self.allowed(rate: 4), "\(busiest) requests within one second")
        let span = Self.span(since: started, arrivals)
        #expect(span >= .milliseconds(3700), "16 requests 250 ms apart take 3.75 s: \(span)")
    }

    @Test func aWatcherPacesEveryFileOfItsSpoolTogether() async throws {
        let s = try SpoolWorld()
        let watcher = try s.startWatcher(["--rate", "5", "--concurrency", "16"])
        defer { watcher.terminate() }
        let started = ContinuousClock.now
        try s.drop("a.jsonl", imageJobs(s.w, 10, prefix: "a"))
        try s.drop("b.jsonl", imageJobs(s.w, 10, prefix: "b"))
        let settled = await s.wait(upTo: .seconds(30)) { s.jobFiles(s.spool.done).count + s.jobFiles(s.spool.failed).count == 2 }
        #expect(settled, "done: \(s.names(s.spool.done)), failed: \(s.names(s.spool.failed)), log: \(s.log())")
        #expect(s.jobFiles(s.spool.done) == ["a.jsonl", "b.jsonl"], "every job made its 2 s deadline: \(s.log())")

        let arrivals = s.w.server.arrivals(pathPrefix: "/images/")
        #expect(arrivals.count == 20)
        let busiest = Self.busiestSecond(arrivals)
        #expect(busiest <= Self.allowed(rate: 5), "two files, one pace: \(busiest) requests within one second")
        let span = Self.span(since: started, arrivals)
        #expect(span >= .milliseconds(3750), "20 requests 200 ms apart take 3.8 s: \(span)")
    }

    @Test func a429WithRetryAfterHoldsBackTheOtherJobsOfItsHost() async throws {
        let w = try Workspace()
        let limited = #"{"kind": "image", "key": "limited", "url": "\#(w.base)/images/png.png?status=429&retryAfter=2", "retries": 0}"#
        let others = (1...3).map { #"{"kind": "image", "key": "other:\#($0)", "url": "\#(w.base)/images/png.png?n=\#($0)"}"# }
        w.write("jobs.jsonl", ([limited] + others).joined(separator: "\n"))
        // One at a time, in file order: the 429 comes first, the others are sent after it.
        let run = try await w.run(["run", "jobs.jsonl", "--concurrency", "1", "--json"])
        #expect(run.status != 0, "the 429 job fails (no retries): \(run.stderr)")
        #expect(try w.status("limited") == "failed")
        for n in 1...3 { #expect(try w.status("other:\(n)") == "succeeded", "the pause held no deadline time") }

        let arrivals = w.server.arrivals(pathPrefix: "/images/")
        #expect(arrivals.count == 4)
        guard arrivals.count == 4 else { return }
        let pause = arrivals[0].duration(to: arrivals[1])
        #expect(pause >= .milliseconds(1950) && pause < .seconds(5), "the next job of the host waited out Retry-After: 2: \(pause)")
        #expect(arrivals[1].duration(to: arrivals[3]) < .seconds(3), "after the pause the host is not paced (held back, each would wait 2 s more): \(arrivals)")
    }

    @Test(arguments: ["0", "-1", "abc", "1e3", "inf", "nan", "", "5/s", "1001"])
    func aRateThatIsNotAPositiveNumberIsAUsageError(value: String) async throws {
        let w = try Workspace()
        w.write("jobs.jsonl", imageJobs(w, 1, prefix: "x"))
        for command in ["run", "watch"] {
            let arguments = command == "run" ? ["run", "jobs.jsonl", "--rate", value] : ["watch", "--spool", "spool", "--rate", value]
            let result = try await w.run(arguments)
            #expect(result.status == 2, "\(command) --rate '\(value)': \(result.stderr)")
            #expect(result.stderr.hasPrefix("Error: --rate must be a number of requests per second above 0 and at most 1000"), "\(result.stderr)")
            #expect(result.stderr.contains("\nUsage: runner \(command) "), "\(result.stderr)")
        }
        #expect(w.server.totalRequests == 0)
    }

    @Test func aRateMayBeADecimalAndIsListedInTheHelp() async throws {
        let w = try Workspace()
        w.write("jobs.jsonl", imageJobs(w, 2, prefix: "half"))
        let started = ContinuousClock.now
        let run = try await w.run(["run", "jobs.jsonl", "--rate", "2.5", "--json"])
        #expect(run.status == 0, "stderr: \(run.stderr)")
        let arrivals = w.server.arrivals(pathPrefix: "/images/").sorted()
        #expect(arrivals.count == 2)
        // The second token comes 400 ms after the first, which is taken after `started`.
        if arrivals.count == 2 { #expect(started.duration(to: arrivals[1]) >= .milliseconds(400), "2.5 per second: 400 ms apart") }
        for command in ["run", "watch"] {
            let help = try await w.run([command, "--help"])
            #expect(help.stdout.contains("--rate N"), "\(help.stdout)")
        }
    }
}
