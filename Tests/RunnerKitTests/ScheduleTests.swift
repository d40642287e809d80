import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

// Schedules fired on the test clock with the in-memory store (the rules of the PostgreSQL one):
// each tick one batch across the watchers, whichever fires it; ticks missed while no watcher ran
// follow the catch-up. QueueTests show the same through the binary against a real PostgreSQL.

@Suite(.serialized, .timeLimit(.minutes(1)))
struct ScheduleTests {
    let clock = TestClock()
    let store: InMemoryQueueStore

    init() { store = InMemoryQueueStore(lease: .seconds(30), clock: clock) }

    static func jobs(_ keys: [String], unique: Bool = false) -> [QueueSubmission] {
        keys.map { key in
            QueueSubmission(
                key: key, kind: "fetch", job: #"{"job": {"kind": "fetch", "key": "\#(key)", "url": "http://queue.test/\#(key)"}, "defaults": {}}"#,
                file: "night.jsonl", unique: unique)
        }
    }

    func add(_ name: String = "night", every seconds: Int64 = 2, catchUp: Schedule.CatchUp = .one, jobs: [QueueSubmission] = jobs(["a", "b"])) throws {
        try store.addSchedule(Schedule(name: name, timing: .every(seconds: seconds), catchUp: catchUp, jobs: jobs, files: ["night.jsonl"]))
    }

    var epoch: TimeInterval { store.scheduleEpoch.timeIntervalSince1970 }

    /// The ticks fired so far, as seconds after the store's start.
    var ticks: [Double] { store.ticks.map { $0.tick.timeIntervalSince1970 - epoch } }

    @Test func everyTickFiresOneBatchWhicheverWatcherGetsThereFirst() async throws {
        try add()
        let watchers = (0..<3).map { _ in store.connection() }
        var fired: [Schedule.Fired] = []
        // Three watchers, each looking every 0.5 s in a different order, for 20 s.
        for step in 1...40 {
            clock.advance(by: .milliseconds(500))
            for index in 0..<3 {
                fired += try await watchers[(index + step) % 3].fireDueSchedules(runner: "w\(index)").fired
            }
        }
        #expect(ticks == stride(from: 2.0, through: 20, by: 2).map { $0 })
        #expect(fired.count == 10 && Set(fired.map(\.batch)).count == 10)
        #expect(fired.allSatisfy { $0.jobs == 2 && $0.covers == 1 })
        // Each batch holds the schedule's jobs once.
        let rows = store.rows
        #expect(rows.count == 20)
        for batch in fired.map(\.batch) { #expect(rows.filter { $0.batch == batch }.map(\.key).sorted() == ["a", "b"]) }
        let listed = try store.schedules()
        #expect(listed.first?.lastBatch == fired.last?.batch)
        #expect(listed.first?.nextAt == Date(timeIntervalSince1970: epoch + 22))
    }

    @Test func aFleetLateByLessThanALeaseFiresEveryTickOnItsOwn() async throws {
        try add()
        _ = try await store.fireDueSchedules(runner: "a")
        // The database away for 10 s (less than the 30 s lease): the watchers were there.
        clock.advance(by: .seconds(10))
        let fired = try await store.fireDueSchedules(runner: "a").fired
        #expect(fired.map(\.covers) == [1, 1, 1, 1, 1])
        #expect(ticks == [2, 4, 6, 8, 10])
    }

    @Test(arguments: Schedule.CatchUp.allCases)
    func ticksMissedWhileNoWatcherRanFollowTheCatchUp(_ catchUp: Schedule.CatchUp) async throws {
        try add(catchUp: catchUp)
        _ = try await store.fireDueSchedules(runner: "a")
        // No watcher for 100 s (more than a lease): 50 ticks missed.
        clock.advance(by: .seconds(100))
        let fired = try await store.fireDueSchedules(runner: "a").fired
        switch catchUp {
        case .one:
            #expect(fired.count == 1 && fired[0].covers == 50 && fired[0].jobs == 2)
            #expect(ticks == [100])
        case .none:
            #expect(fired.count == 1 && fired[0].dropped == 50 && fired[0].batch.isEmpty)
            #expect(ticks.isEmpty && store.rows.isEmpty)
        case .all:
            #expect(fired.count == 50 && fired.allSatisfy { $0.covers == 1 })
            #expect(ticks == stride(from: 2.0, through: 100, by: 2).map { $0 })
        }
        // The fleet is back: the next tick fires on its own.
        clock.advance(by: .seconds(2))
        let next = try await store.fireDueSchedules(runner: "a").fired
        #expect(next.count == 1 && next[0].covers == 1 && next[0].tick == Date(timeIntervalSince1970: epoch + 102))
    }

    @Test func uniqueJobsOfASlowNightAreLeftOut() async throws {
        try add(jobs: Self.jobs(["slow"], unique: true))
        clock.advance(by: .seconds(2))
        _ = try await store.fireDueSchedules(runner: "a")
        clock.advance(by: .seconds(2))
        let second = try await store.fireDueSchedules(runner: "a").fired
        #expect(second.count == 1 && second[0].jobs == 0, "the first night's job is still queued")
        #expect(store.rows.count == 1)
    }

    @Test func aRemovedScheduleFiresNoMore() async throws {
        try add()
        #expect(throws: QueueError.self) { try add() }
        clock.advance(by: .seconds(2))
        #expect(try await store.fireDueSchedules(runner: "a").fired.count == 1)
        #expect(try store.removeSchedule("night"))
        #expect(try !store.removeSchedule("night"))
        clock.advance(by: .seconds(10))
        let pass = try await store.fireDueSchedules(runner: "a")
        #expect(pass.fired.isEmpty && pass.nextIn == nil)
    }

    /// Watchers (feeds) running on the clock fire the schedule themselves, asleep until its next
    /// tick; the jobs of each batch run.
    @Test func runningWatchersFireEachTickOnceAndRunItsJobs() async throws {
        let folder = TemporaryFolder()
        let http = RecordingHTTP(fallback: .ok("fine"))
        try add(every: 5, jobs: Self.jobs(["a"]))
        var registry = KindRegistry()
        try registry.register(PlainFetchKind.self)
        let fired = Watched<[Schedule.Fired]>([])
        var runs: [(QueueFeed, Task<Void, Never>)] = []
        for name in ["w1", "w2"] {
            var configuration = QueueFeed.Configuration(
                engine: .init(registry: registry, store: try OutputStore(root: folder.path + "/out"), http: http).with { $0.clock = clock },
                store: store.connection())
            configuration.runner = name
            configuration.durable = false
            configuration.keep = nil
            let feed = try QueueFeed(configuration: configuration, onEvent: { event in
                if case .scheduleFired(let tick) = event { fired.update { $0.append(tick) } }
            })
            runs.append((feed, Task { await feed.run() }))
        }
        for round in 1...4 {
            // Asleep until the tick: one step of the clock to it fires it.
            await eventually("both watchers asleep until the tick") {
                clock.pendingSleeps.filter { $0 > .milliseconds(4900) && $0 <= .seconds(5) }.count >= 2
            }
            clock.advance(by: .seconds(5))
            await eventually("tick \(round) fired") { fired.read { $0.count } == round }
            await eventually("its job ran") { store.rows.filter { $0.state == "done" }.count == round }
        }
        #expect(ticks == [5, 10, 15, 20])
        #expect(Set(fired.read { $0.map(\.batch) }).count == 4)
        for (feed, run) in runs {
            feed.shutdown(grace: .zero)
            clock.advance(by: .seconds(1))
            await run.value
        }
    }
}
