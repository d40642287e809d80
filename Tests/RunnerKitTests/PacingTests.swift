import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

// Pacing in process: the pacer alone, then the engine's jobs through it, every wait on a test
// clock (no test sleeps on the real clock).

/// Settings for `hosts`, by pattern text.
private func config(rate: Double? = nil, hosts: [(String, HostSettings)] = []) throws -> RequestConfig {
    RequestConfig(hosts: try hosts.map { (try HostPattern(parsing: $0.0), $0.1) }, rate: rate)
}

@Suite(.timeLimit(.minutes(1)))
struct HostPacerTests {
    let clock = TestClock()

    /// Takes `count` tokens of `host` one after the other, returning when each came.
    private func take(_ pacer: HostPacer, _ host: String, _ count: Int) -> Task<[Duration], any Error> {
        let clock = self.clock
        return Task {
            var times: [Duration] = []
            for _ in 0..<count {
                try await pacer.acquire(host: host)
                times.append(clock.now.offset)
            }
            return times
        }
    }

    @Test func tokensOfAHostComeOneOverTheRateApart() async throws {
        let pacer = HostPacer(requests: try config(rate: 4), clock: clock)
        let taking = take(pacer, "a.test", 4)
        for _ in 0..<3 {
            #expect(await clock.nextSleep(within: .seconds(10)) == .milliseconds(250))
            clock.advance(by: .milliseconds(250))
        }
        #expect(try await taking.value == [.zero, .milliseconds(250), .milliseconds(500), .milliseconds(750)])
        clock.expectNoPendingSleeps()
    }

    @Test func anIdleHostSavesUpNoBurst() async throws {
        let pacer = HostPacer(requests: try config(rate: 1), clock: clock)
        try await pacer.acquire(host: "a.test")
        clock.advance(by: .seconds(10))
        try await pacer.acquire(host: "a.test")
        let second = take(pacer, "a.test", 1)
        #expect(await clock.nextSleep(within: .seconds(10)) == .seconds(1), "the bucket holds one token: ten idle seconds buy one request")
        clock.advance(by: .seconds(1))
        #expect(try await second.value == [.seconds(11)])
    }

    @Test func hostsArePacedIndependentlyAndByNameInAnyCase() async throws {
        let pacer = HostPacer(requests: try config(rate: 1), clock: clock)
        try await pacer.acquire(host: "a.test")
        try await pacer.acquire(host: "b.test")
        #expect(clock.sleeperCount == 0, "another host's token is there at once")
        let again = take(pacer, "A.TEST", 1)
        #expect(await clock.nextSleep(within: .seconds(10)) == .seconds(1), "A.TEST is a.test")
        clock.advance(by: .seconds(1))
        #expect(try await again.value == [.seconds(1)])
    }

    @Test func aHostsOwnRateOverridesTheDefault() async throws {
        let pacer = HostPacer(
            requests: try config(rate: 10, hosts: [("slow.test", HostSettings(rate: 0.5)), ("*.free.test", HostSettings(perHost: 2))]),
            clock: clock)
        #expect(pacer.rate(forHost: "SLOW.test") == 0.5)
        #expect(pacer.rate(forHost: "api.free.test") == 10, "a host without a rate of its own gets --rate")
        try await pacer.acquire(host: "slow.test")
        try await pacer.acquire(host: "fast.test")
        let slow = take(pacer, "slow.test", 1)
        let fast = take(pacer, "fast.test", 1)
        await clock.waitForSleepers(2)
        #expect(clock.pendingSleeps == [.milliseconds(100), .seconds(2)])
        clock.advance(by: .milliseconds(100))
        #expect(try await fast.value == [.milliseconds(100)])
        clock.advance(by: .milliseconds(1900))
        #expect(try await slow.value == [.seconds(2)])
    }

    @Test func unpacedHostsNeverWait() async throws {
        let pacer = HostPacer(requests: RequestConfig(), clock: clock)
        for _ in 0..<1000 { try await pacer.acquire(host: "a.test") }
        #expect(clock.sleepsStarted == 0)
        #expect(pacer.waits.waited == .zero)
    }

    @Test func aPauseHoldsBackItsHostOnlyAndIsCapped() async throws {
        let pacer = HostPacer(requests: RequestConfig(), clock: clock, pauseCap: .seconds(30))
        pacer.pause(host: "Busy.test", for: .seconds(5))
        try await pacer.acquire(host: "calm.test")
        #expect(clock.sleeperCount == 0, "another host is not paused")
        let waiters = (0..<3).map { _ in take(pacer, "busy.test", 1) }
        #expect(await clock.nextSleep(within: .seconds(10)) == .seconds(5))
        clock.advance(by: .seconds(5))
        for waiter in waiters { #expect(try await waiter.value == [.seconds(5)], "an unpaced host lets all go once the pause ends") }

        pacer.pause(host: "busy.test", for: .seconds(3600))
        #expect(pacer.pauseLeft(host: "busy.test") == .seconds(30), "an hour's Retry-After is capped")
        pacer.pause(host: "busy.test", for: .seconds(1))
        #expect(pacer.pauseLeft(host: "busy.test") == .seconds(30), "a shorter pause never shortens a longer one")
        #expect(pacer.waits.pauses == 3)
        clock.advance(by: .seconds(30))
        clock.expectNoPendingSleeps()
    }

    @Test func aPauseMovesAWaitingTokenLater() async throws {
        let pacer = HostPacer(requests: try config(rate: 1), clock: clock)
        try await pacer.acquire(host: "a.test")
        let next = take(pacer, "a.test", 1)
        #expect(await clock.nextSleep(within: .seconds(10)) == .seconds(1))
        pacer.pause(host: "a.test", for: .seconds(4))
        clock.advance(by: .seconds(1))
        #expect(await clock.nextSleep(within: .seconds(10)) == .seconds(3), "woken at its token, it sleeps out the pause")
        clock.advance(by: .seconds(3))
        #expect(try await next.value == [.seconds(4)])
    }

    @Test func aWaiterCancelledLeavesTheLineWithoutTakingItsToken() async throws {
        let pacer = HostPacer(requests: try config(rate: 1), clock: clock)
        try await pacer.acquire(host: "a.test")
        let head = take(pacer, "a.test", 1)
        await clock.waitForSleepers(1)
        let second = take(pacer, "a.test", 1)
        let third = take(pacer, "a.test", 1)
        #expect(await waitUntil { pacer.waiting(host: "a.test") == 3 })

        head.cancel()
        await #expect(throws: CancellationError.self) { try await head.value }
        second.cancel()
        await #expect(throws: CancellationError.self) { try await second.value }
        #expect(await waitUntil { pacer.waiting(host: "a.test") == 1 })

        #expect(await clock.nextSleep(within: .seconds(10)) == .seconds(1), "the token the cancelled ones left is the third's")
        clock.advance(by: .seconds(1))
        #expect(try await third.value == [.seconds(1)])
        #expect(pacer.waiting(host: "a.test") == 0)
        clock.expectNoPendingSleeps()
    }

    /// Polls `condition` (on the real clock, bounded), for states no sleep on the test clock tells.
    private func waitUntil(_ condition: () -> Bool) async -> Bool {
        for _ in 0..<2000 {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return condition()
    }

    @Test func aHostsOwnPerHostOverridesTheDefaultCap() async throws {
        let hosts = HostLimiter(limit: 8, requests: try config(hosts: [("*.slow.test", HostSettings(perHost: 2)), ("big.test", HostSettings(perHost: 20))]))
        #expect(hosts.limiter(for: "API.Slow.test").limit == 2)
        #expect(hosts.limiter(for: "big.test").limit == 20)
        #expect(hosts.limiter(for: "other.test").limit == 8)
        let slow = hosts.limiter(for: "api.slow.test")
        try await slow.acquire()
        try await slow.acquire()
        #expect(slow.available == 0, "two slots, and no more")
    }

    /// 30 000 paced hosts, one after the other as time goes on, keep a table of at most
    /// `keptHosts`: a host whose next token is there and that nobody waits for is forgotten.
    @Test func thePacersTableStaysBounded() async throws {
        let clock = TestClock()
        let pacer = HostPacer(requests: try config(rate: 1), clock: clock)
        var largest = 0
        for index in 0..<30_000 {
            if index % 100 == 0 { clock.advance(by: .seconds(2)) }
            #expect(try await pacer.acquire(host: "h\(index).test") == .zero)
            largest = max(largest, pacer.hostCount)
        }
        #expect(largest <= HostPacer.keptHosts, "\(largest) hosts kept at most")
        #expect(pacer.hostCount >= 100, "the hosts whose token is not back yet stay")
    }

    /// Past `kept` hosts, the idle ones asked for longest ago are forgotten (30 000 hosts keep
    /// a table of at most `kept`); a busy host never is, and a host the config names is still
    /// counted as contacted.
    @Test func theHostTableKeepsTheBusiestHostsAndForgetsTheRest() async throws {
        let hosts = HostLimiter(limit: 1, requests: try config(hosts: [("named.test", HostSettings(perHost: 3))]), kept: 100)
        let busy = hosts.limiter(for: "busy.test")
        try await busy.acquire()
        #expect(hosts.limiter(for: "named.test").limit == 3)
        for index in 0..<30_000 { _ = hosts.limiter(for: "h\(index).test") }
        #expect(hosts.hostLimiters.count <= 100, "\(hosts.hostLimiters.count) hosts kept")
        #expect(hosts.limiter(for: "busy.test") === busy, "the busy host's limiter stays, its slot with it")
        #expect(busy.available == 0)
        #expect(hosts.hostLimiters.contains { $0.host == "h29999.test" }, "the newest stay")
        #expect(!hosts.hostLimiters.contains { $0.host == "h0.test" }, "the oldest idle ones go")
        #expect(hosts.hosts.contains("named.test") && hosts.hosts.count <= 101)
        busy.release()
    }

    @Test func theClientsConnectionCapLetsTheLargestPerHostThrough() throws {
        var options = JobEngine.Configuration()
        options.perHost = 8
        #expect(options.connectionsPerHost == 8)
        options.requests = try config(hosts: [("a.test", HostSettings(perHost: 2)), ("b.test", HostSettings(perHost: 20))])
        #expect(options.connectionsPerHost == 20)
        options.perHost = 32
        #expect(options.connectionsPerHost == 32)
    }
}

// MARK: - The engine through the pacer

/// A kind that fetches its URL and notes when its attempt began on the test clock.
private struct TimedFetchKind: JobKind {
    static let name = "timed-fetch"
    static let summary = "Fetches a URL and notes when (for tests)."
    static let parameters: [KindParameter] = []
    let clock: TestClock
    let starts: Locked<[String: [Duration]]>

    init(clock: TestClock, starts: Locked<[String: [Duration]]>) {
        self.clock = clock
        self.starts = starts
    }

    init(fields: inout JobFields) throws(JobSpecError) { throw JobSpecError(field: nil, "made by the tests only") }

    func run(in context: JobContext) async throws -> KindOutcome {
        let now = clock.now.offset
        starts.withLock { $0[context.job.key, default: []].append(now) }
        let fetch = try await context.fetch(folder: "fetched")
        return .fetched(fetch, folder: "fetched", fileExtension: "bin")
    }
}

@Suite(.timeLimit(.minutes(1)))
struct EnginePacingTests {
    let folder = TemporaryFolder()
    let http = RecordingHTTP(fallback: .ok("fine"))
    let clock = TestClock()
    let starts = Locked<[String: [Duration]]>([:])

    private func engine(_ requests: RequestConfig, concurrency: Int = 8) throws -> JobEngine {
        try JobEngine(configuration: .init(store: try OutputStore(root: folder.path), http: http).with {
            $0.clock = clock
            $0.concurrency = concurrency
            $0.backoff = Backoff(base: .seconds(1))
            $0.requests = requests
        })
    }

    private func job(_ url: String, key: String, retries: Int = 0, timeout: Duration = .seconds(2)) -> JobDescriptor {
        JobDescriptor(TimedFetchKind(clock: clock, starts: starts), key: key, url: URL(string: url)!, timeout: timeout, retries: retries)
    }

    @Test func waitingForATokenHoldsNoDeadlineTime() async throws {
        let engine = try engine(try config(rate: 1.0 / 3))
        let jobs = [job("http://a.test/1", key: "one"), job("http://a.test/2", key: "two")]
        let run = Task { await engine.run(jobs) }
        await http.waitForRequests(1)
        // Once the first job's attempt (and its 2 s deadline) is over, one sleep is left: the token's.
        #expect(await waitUntil { clock.pendingSleeps == [.seconds(3)] }, "the second job waits 3 s for its token: \(clock.pendingSleeps)")
        clock.advance(by: .seconds(3))
        let summary = await run.value
        #expect(summary.counts[.succeeded] == 2, "a 3 s wait for a token with a 2 s deadline still succeeds: \(summary.counts)")
        #expect(starts.value.values.flatMap { $0 }.sorted() == [.zero, .seconds(3)])
        #expect(engine.paceWaits.waited == .seconds(3))
        #expect(engine.paceWaits.busiestHost == "a.test")
        clock.expectNoPendingSleeps()
    }

    @Test func tokensAreSharedByEveryJobOfTheEngine() async throws {
        let engine = try engine(try config(rate: 2, hosts: [("b.test", HostSettings(rate: 1))]))
        let jobs = (1...4).map { job("http://a.test/\($0)", key: "a\($0)", timeout: .seconds(60)) }
            + (1...3).map { job("http://b.test/\($0)", key: "b\($0)", timeout: .seconds(60)) }
        let run = Task { await engine.run(jobs) }
        await http.waitForRequests(2)
        // Tokens come at 0.5, 1, 1.5 (a.test) and 1, 2 s (b.test): four instants to move to. A
        // job's sleep for its token begins only once the job before it took its own, so before
        // each step the token sleeps known to come are waited for (2, 2, 2, then 1): the earliest
        // sleep pending is then the next instant. And the jobs whose token has come must have
        // started (2, 3, 5, then 6), or one woken at 1.5 s could note its start only after the
        // clock moved on to 2 s.
        for (expected, started) in [(2, 2), (2, 3), (2, 5), (1, 6)] {
            let pending = await waitUntil {
                clock.pendingSleeps.filter { $0 <= .seconds(5) }.count >= expected
                    && starts.value.values.map(\.count).reduce(0, +) >= started
            }
            #expect(pending, "\(expected) token sleeps (pending: \(clock.pendingSleeps)) and \(started) starts (\(starts.value))")
            let next = try #require(await clock.nextSleep(within: .seconds(5)))
            clock.advance(by: next)
        }
        let summary = await run.value
        #expect(summary.counts[.succeeded] == 7)
        let a = starts.value.filter { $0.key.hasPrefix("a") }.values.flatMap { $0 }.sorted()
        let b = starts.value.filter { $0.key.hasPrefix("b") }.values.flatMap { $0 }.sorted()
        #expect(a == [.zero, .milliseconds(500), .seconds(1), .milliseconds(1500)], "--rate 2: every 500 ms")
        #expect(b == [.zero, .seconds(1), .seconds(2)], "the host's own rate 1: every second, independent of a.test")
    }

    /// Polls `condition` (on the real clock, bounded), for states no sleep on the test clock tells.
    private func waitUntil(_ condition: () -> Bool) async -> Bool {
        for _ in 0..<2000 {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return condition()
    }

    @Test func a429WithRetryAfterPausesTheOtherJobsOfItsHostOnly() async throws {
        let busy = "http://busy.test/limited"
        http.script(busy, .status(429, headers: ["Retry-After": "5"]))
        let engine = try engine(RequestConfig())
        let first = await engine.run(job(busy, key: "limited", timeout: .seconds(60)))
        #expect(first.status == .failed)
        #expect(first.httpStatus == 429)

        let other = Task { await engine.run(job("http://busy.test/other", key: "other")) }
        let calm = await engine.run(job("http://calm.test/x", key: "calm"))
        #expect(calm.status == .succeeded, "another host is not paused")
        #expect(starts.value["calm"] == [.zero])
        #expect(await clock.nextSleep(within: .seconds(10)) == .seconds(5), "the other job of busy.test waits out the pause")
        #expect(http.requests(to: "http://busy.test/other").isEmpty)
        clock.advance(by: .seconds(5))
        let result = await other.value
        #expect(result.status == .succeeded, "the pause held no deadline time of its 2 s: \(result.error ?? "")")
        #expect(starts.value["other"] == [.seconds(5)])
        #expect(engine.paceWaits.pauses == 1)
        clock.expectNoPendingSleeps()
    }

    @Test func a503WithRetryAfterPausesTheHostForTheRetryingJobToo() async throws {
        let url = "http://busy.test/down"
        http.script(url, .status(503, headers: ["Retry-After": "4"]), .ok("back"))
        let engine = try engine(RequestConfig())
        let run = Task { await engine.run(job(url, key: "down", retries: 1, timeout: .seconds(60))) }
        await http.waitForRequests(1)
        #expect(await waitUntil { engine.pacer.pauseLeft(host: "busy.test") == .seconds(4) }, "the 503 paused its host")
        let waiting = Task { await engine.run(job("http://busy.test/second", key: "second")) }
        #expect(await clock.nextSleep(within: .seconds(10)) == .seconds(4))
        try await Task.sleep(for: .milliseconds(50))
        #expect(http.requests(to: "http://busy.test/second").isEmpty, "a job not retrying waits for the pause too")
        clock.advance(by: .seconds(4))
        #expect(await run.value.status == .succeeded)
        #expect(await waiting.value.status == .succeeded)
        #expect(starts.value["down"] == [.zero, .seconds(4)])
        #expect(starts.value["second"] == [.seconds(4)])
    }

    @Test func aJobCancelledWhileWaitingForItsTokenEndsCancelled() async throws {
        let engine = try engine(try config(rate: 0.1))
        let first = await engine.run(job("http://a.test/1", key: "first"))
        #expect(first.status == .succeeded)
        let run = Task { await engine.run(job("http://a.test/2", key: "second", retries: 3)) }
        #expect(await clock.nextSleep(within: .seconds(20)) == .seconds(10))
        #expect(engine.taskManager.cancel(key: "second"))
        let result = await run.value
        #expect(result.status == .cancelled)
        #expect(http.requests(to: "http://a.test/2").isEmpty)
        #expect(clock.now.offset == .zero)
        clock.expectNoPendingSleeps()
        let third = Task { await engine.run(job("http://a.test/3", key: "third")) }
        #expect(await clock.nextSleep(within: .seconds(20)) == .seconds(10), "the cancelled job took no token: the next one is the same")
        clock.advance(by: .seconds(10))
        #expect(await third.value.status == .succeeded)
    }
}
