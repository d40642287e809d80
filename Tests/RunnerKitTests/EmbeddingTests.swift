import Foundation
import RunnerKit
import RunnerTestSupport
import Synchronization
import Testing

// The engine as a program embeds it: jobs in from an async sequence, results out as they end,
// cancel by key (running or waiting), job defaults, URL templates in code, kinds checked when
// registered, results as values. In process, on the test clock, with the HTTP double.

/// A kind that fetches its URL as it is; `{id}` in its URL is filled with `id`.
private struct PlainKind: JobKind {
    static let name = "plain"
    static let summary = "Fetches a URL as it is (for tests)."
    static let parameters: [KindParameter] = []
    var id = "x"

    init(id: String = "x") { self.id = id }
    init(fields: inout JobFields) throws(JobSpecError) {}

    func resolveURL(_ template: String) -> String { template.replacingOccurrences(of: "{id}", with: id) }

    func run(in context: JobContext) async throws -> KindOutcome {
        let fetch = try await context.fetch(folder: "plain")
        return .fetched(fetch, folder: "plain", fileExtension: "bin")
    }
}

private func plain(_ url: String, key: String) -> JobDescriptor {
    JobDescriptor(PlainKind(), key: key, url: URL(string: url)!)
}

/// An async sequence of `jobs` that counts how many were taken from it, and may throw at its end.
private struct CountedJobs: AsyncSequence, Sendable {
    struct Broken: Error, Equatable {}
    let jobs: [JobDescriptor]
    let taken: Counter
    var throwsAtEnd = false

    struct AsyncIterator: AsyncIteratorProtocol {
        let base: CountedJobs
        var index = 0
        mutating func next() async throws -> JobDescriptor? {
            guard index < base.jobs.count else {
                if base.throwsAtEnd { throw Broken() }
                return nil
            }
            defer { index += 1 }
            base.taken.bump()
            return base.jobs[index]
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: self) }
}

/// Counts the jobs reported queued.
private final class QueuedCount: RunObserver {
    let count = Counter()
    func jobQueued(_ job: JobDescriptor) { count.bump() }
}

@Suite(.timeLimit(.minutes(1)))
struct EmbeddingTests {
    let folder = TemporaryFolder()
    let http = RecordingHTTP()
    let clock = TestClock()

    func engine(concurrency: Int = 4, defaults: JobDefaults = JobDefaults(), observer: any RunObserver = SilentObserver()) throws -> JobEngine {
        var registry = KindRegistry()
        try registry.register(PlainKind.self)
        return try JobEngine(configuration: .init(registry: registry, store: try OutputStore(root: folder.path), http: http).with {
            $0.clock = clock
            $0.concurrency = concurrency
            $0.jobDefaults = defaults
        }, observer: observer)
    }

    // MARK: Jobs in from an async sequence, results out as they end

    @Test func anAsyncStreamOfJobsYieldsEachResultWithNoAdapter() async throws {
        let engine = try engine()
        for name in ["a", "b", "c"] { http.script("http://host.test/\(name)", .ok(name)) }
        http.script("http://host.test/gone", .status(404))
        let (jobs, input) = AsyncStream.makeStream(of: JobDescriptor.self)
        for name in ["a", "b", "c", "gone"] { input.yield(plain("http://host.test/\(name)", key: name)) }
        input.finish()

        var ended: [String: JobStatus] = [:]
        for await result in engine.results(for: jobs) { ended[result.key] = result.status }
        #expect(ended == ["a": .succeeded, "b": .succeeded, "c": .succeeded, "gone": .notFound])
    }

    @Test func runTakesAnAsyncSequenceAndThrowsItsErrorOnceTheJobsTakenEnded() async throws {
        let engine = try engine()
        http.script("http://host.test/a", .ok("a"))
        let taken = Counter()
        let jobs = CountedJobs(jobs: [plain("http://host.test/a", key: "a")], taken: taken, throwsAtEnd: true)
        await #expect(throws: CountedJobs.Broken.self) { _ = try await engine.run(jobs) }
        #expect(try OutputStore(root: folder.path).readRecord(forKey: "a")?["status"] == .string("succeeded"))

        let (stream, input) = AsyncStream.makeStream(of: JobDescriptor.self)
        input.yield(plain("http://host.test/a", key: "a"))
        input.finish()
        let summary = await engine.run(stream)
        #expect(summary.counts == [.succeeded: 1])
    }

    @Test func jobsAreTakenFromTheSequenceOnlyAsSlotsFree() async throws {
        let queued = QueuedCount()
        let engine = try engine(concurrency: 2, observer: queued)
        for i in 0..<6 { http.script("http://host.test/\(i)", .hang) }
        let taken = Counter()
        let jobs = CountedJobs(jobs: (0..<6).map { plain("http://host.test/\($0)", key: "k\($0)") }, taken: taken)
        let consumer = Task {
            var count = 0
            for try await _ in engine.results(for: jobs) { count += 1 }
            return count
        }
        #expect(await http.waitForRequests(2))
        #expect(await queued.count.waitFor(3))
        try await Task.sleep(for: .milliseconds(20))  // would it take more, it would have by now
        #expect(taken.value == 3, "two running and one waiting for a slot, not \(taken.value)")
        #expect(http.requests.count == 2)
        consumer.cancel()
        #expect(try await consumer.value <= 6)
    }

    // MARK: Cancel by key

    @Test func cancelByKeyReachesAJobWaitingForASlotAndRecordsTheReason() async throws {
        let queued = QueuedCount()
        let engine = try engine(concurrency: 1, observer: queued)
        http.script("http://host.test/holder", .hang)
        http.script("http://host.test/waiting", .ok("never"))
        let (jobs, input) = AsyncStream.makeStream(of: JobDescriptor.self)
        input.yield(plain("http://host.test/holder", key: "holder"))
        input.yield(plain("http://host.test/waiting", key: "waiting"))
        input.finish()
        let results = Task {
            var ended: [String: JobResult] = [:]
            for await result in engine.results(for: jobs) { ended[result.key] = result }
            return ended
        }
        #expect(await http.waitForRequests(1))
        #expect(await queued.count.waitFor(2), "the second job is taken and waits for the slot")
        #expect(!engine.taskManager.isRunning(key: "waiting"))
        #expect(engine.cancel(key: "waiting", reason: "no longer wanted"))
        #expect(engine.cancel(key: "holder", reason: "the operator said so"))
        let ended = await results.value

        let waiting = try #require(ended["waiting"])
        #expect(waiting.status == .cancelled && waiting.error == "no longer wanted" && waiting.reason == .cancelled)
        #expect(http.requests(to: "http://host.test/waiting").isEmpty, "the waiting job never ran")
        let holder = try #require(ended["holder"])
        #expect(holder.status == .cancelled && holder.error == "the operator said so")
        #expect(try OutputStore(root: folder.path).readRecord(forKey: "waiting")?["reason"] == .string("cancelled"))
        #expect(!engine.cancel(key: "waiting"), "nothing of the key is left")
    }

    @Test func shutdownCancelsWhatRunsAndWritesItsRecord() async throws {
        let engine = try engine()
        http.script("http://host.test/hang", .hang)
        let run = Task { await engine.run(plain("http://host.test/hang", key: "hang")) }
        #expect(await http.waitForRequests(1))
        await engine.shutdown(reason: "closing")
        #expect(engine.taskManager.count == 0)
        #expect(try OutputStore(root: folder.path).readRecord(forKey: "hang")?["error"] == .string("closing"))
        #expect(await run.value.status == .cancelled)
    }

    // MARK: Job defaults and URL templates

    @Test func jobsBuiltInCodeAndJobFilesTakeTheEngineDefaults() async throws {
        let engine = try engine(defaults: JobDefaults(timeout: .seconds(30), retries: 2, maxBytes: 1000))
        http.script("http://host.test/flaky", .status(503), .status(503), .ok("third"))
        let run = Task { await engine.run(plain("http://host.test/flaky", key: "flaky")) }
        for _ in 0..<2 {  // two backoffs on the test clock
            let backoff = try #require(await clock.nextSleep(within: .seconds(30)))
            clock.advance(by: backoff)
        }
        let result = await run.value
        #expect(result.status == .succeeded && result.attempts == 3, "retries from the defaults: \(result.attempts)")

        // A job that sets its own keeps it.
        http.script("http://host.test/once", .status(503))
        var own = plain("http://host.test/once", key: "once")
        own.retries = 0
        #expect(await engine.run(own).attempts == 1)

        // A job file's job without the fields gets them; one whose defaults line sets them, that.
        var registry = KindRegistry()
        try registry.register(PlainKind.self)
        let bare = try JobDescriptor.decode([("kind", .string("plain")), ("url", .string("http://host.test/x"))], registry: registry)
        let sized = try JobDescriptor.decode(
            [("kind", .string("plain")), ("url", .string("http://host.test/x"))], defaults: [("maxBytes", JSONValue(5))], registry: registry)
        http.script("http://host.test/x", .ok("123456"), .ok("123456"))
        #expect(await engine.run(bare).status == .succeeded, "1000 bytes allowed by the engine's defaults")
        let tooLarge = await engine.run(sized)
        #expect(tooLarge.status == .failed && tooLarge.reason == .tooLarge, "\(tooLarge.error ?? "")")
    }

    @Test func aURLTemplateInCodeIsFilledByTheKind() throws {
        let fromURL = JobDescriptor(PlainKind(id: "42 b"), url: URL(string: "http://host.test/e/{id}")!)
        #expect(fromURL.url.absoluteString == "http://host.test/e/42%20b" || fromURL.url.absoluteString == "http://host.test/e/42 b")
        let fromString = try JobDescriptor(PlainKind(id: "7"), url: "http://host.test/e/{id}.json")
        #expect(fromString.url.absoluteString == "http://host.test/e/7.json")
        #expect(throws: JobSpecError.self) { _ = try JobDescriptor(PlainKind(), url: "ftp://host.test/{id}") }
    }

    // MARK: Results as values

    @Test func aFailedResultHasAReasonAndResultsRoundTripThroughCodable() async throws {
        let engine = try engine()
        http.script("http://host.test/err", .status(500))
        http.script("http://host.test/ok", .ok("fine"))
        let failed = await engine.run(plain("http://host.test/err", key: "err"))
        let succeeded = await engine.run(plain("http://host.test/ok", key: "ok"))
        #expect(failed.reason == .httpStatus && failed.json["reason"] == .string("httpStatus"))
        #expect(succeeded.reason == nil && succeeded.json["reason"] == nil)

        for result in [failed, succeeded] {
            let data = try JSONEncoder().encode(result)
            let decoded = try JSONDecoder().decode(JobResult.self, from: data)
            #expect(decoded == result, "\(String(decoding: data, as: UTF8.self))")
        }
        #expect(failed != succeeded)
    }
}
