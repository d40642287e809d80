import RunnerKit
import Testing

/// What every queue store must do (`QueueFeed.Store`: the core and the capabilities the feed
/// runs jobs with), checked the same way on the in-memory store (on a test
/// clock) and on the PostgreSQL one (on the real clock, with a short lease): claims oldest first
/// and never twice, key locks, release, records, leases that end and are renewed, abandoned jobs
/// failed, the fleet's pace and pauses, claims by kind, notices, pruning.
package struct QueueStoreContract {
    /// Two watchers' views of one empty queue.
    package let first: any QueueFeed.Store
    package let second: any QueueFeed.Store
    /// Queues jobs as `submit --queue` does.
    package let submit: @Sendable ([QueueSubmission]) async throws -> Void
    /// Lets `duration` pass on the stores' clock.
    package let pass: @Sendable (Duration) async -> Void

    package init(
        first: any QueueFeed.Store, second: any QueueFeed.Store, submit: @escaping @Sendable ([QueueSubmission]) async throws -> Void,
        pass: @escaping @Sendable (Duration) async -> Void
    ) {
        self.first = first
        self.second = second
        self.submit = submit
        self.pass = pass
    }

    static func jobs(_ keys: [String]) -> [QueueSubmission] {
        keys.map { QueueSubmission(key: $0, kind: "fetch", job: #"{"job": {"kind": "fetch", "key": "\#($0)"}}"#, file: "contract") }
    }

    package func check(sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let lease = first.lease
        // Listening from now on (a timeout of zero waits for nothing).
        #expect(try await first.notifications(waitingUpTo: .zero).isEmpty, sourceLocation: sourceLocation)
        #expect(try await second.notifications(waitingUpTo: .zero).isEmpty, sourceLocation: sourceLocation)
        try await submit(Self.jobs(["k1", "k2", "k1", "k3"]))
        #expect(try await first.notifications(waitingUpTo: .seconds(1)).contains(.jobs), "a submit is a notice", sourceLocation: sourceLocation)
        #expect(try await second.notifications(waitingUpTo: .seconds(1)).contains(.jobs), "to every watcher", sourceLocation: sourceLocation)

        // Oldest first, never claimed twice; the keys no runner holds are locked with the claim,
        // and a job whose key a runner holds waits for it.
        let mine = try await first.claim(runner: "one", limit: 2)
        #expect(mine.map(\.key) == ["k1", "k2"] && mine.allSatisfy(\.keyLocked), "\(mine)", sourceLocation: sourceLocation)
        let theirs = try await second.claim(runner: "two", limit: 5)
        #expect(theirs.map(\.key) == ["k3"] && theirs.allSatisfy(\.keyLocked), "the second k1 waits for its key: \(theirs)", sourceLocation: sourceLocation)
        #expect(try await first.claim(runner: "one", limit: 5).isEmpty, sourceLocation: sourceLocation)

        // Key locks: one runner at a time.
        #expect(try await second.lockKey("k1", runner: "two") == false, sourceLocation: sourceLocation)
        try await first.unlockKeys(["k1"], runner: "one")
        #expect(try await second.lockKey("k1", runner: "two") == true, sourceLocation: sourceLocation)

        // Given back (its key let go of first), claimable at once; records end claims.
        try await second.unlockKeys(["k3"], runner: "two")
        try await second.release(ids: [theirs[0].id], runner: "two")
        let again = try await first.claim(runner: "one", limit: 5)
        #expect(again.map(\.id) == [theirs[0].id], sourceLocation: sourceLocation)
        let record = #"{"key":"k2","status":"succeeded"}"#
        try await first.finish([QueueFinish(id: mine[1].id, status: "succeeded", error: nil, record: record)], runner: "one", unlocking: ["k2"])
        #expect(try await second.lockKey("k2", runner: "two") == true, "k2 let go of with its record", sourceLocation: sourceLocation)
        // A runner cannot end another's claim.
        try await second.finish([QueueFinish(id: mine[0].id, status: "failed", error: "x", record: "{}")], runner: "two", unlocking: [])

        // A key's last record is the fleet's (validators and payload path for whoever runs it
        // next), handed out with the key's next claim; a record that is not the key's is not.
        #expect(try await second.keyRecord("k2") == record, sourceLocation: sourceLocation)
        #expect(try await second.keyRecord("k1") == nil, "another runner's finish ended nothing", sourceLocation: sourceLocation)
        try await second.unlockKeys(["k2"], runner: "two")
        try await submit(Self.jobs(["k2"]))
        let k2 = try await second.claim(runner: "two", limit: 5)
        #expect(k2.map(\.key) == ["k2"] && k2.first?.previous == record, "\(k2.map(\.previous))", sourceLocation: sourceLocation)
        try await second.finish(
            [QueueFinish(id: k2[0].id, status: "failed", error: "unreadable", record: #"{"key":"k2","status":"failed"}"#, isKeyRecord: false)],
            runner: "two", unlocking: ["k2"])
        #expect(try await first.keyRecord("k2") == record, "a job this runner could not read leaves the key's record", sourceLocation: sourceLocation)

        // A record stored with its hooks pending keeps the claim (the job is not done) and ends
        // it when they ended; its key is let go of at once.
        try await submit([QueueSubmission(key: "h1", kind: "hooked", job: #"{"job": {"kind": "hooked", "key": "h1"}}"#, file: "contract")])
        let hooked = try await first.claim(runner: "one", limit: 5, kinds: ["hooked"])
        #expect(hooked.map(\.key) == ["h1"] && hooked.first?.outcome == nil, sourceLocation: sourceLocation)
        let h1 = #"{"key":"h1","status":"succeeded"}"#
        try await first.finish(
            [QueueFinish(id: hooked[0].id, status: "succeeded", error: nil, record: h1, hooksPending: true)], runner: "one", unlocking: ["h1"])
        #expect(try await second.keyRecord("h1") == h1, sourceLocation: sourceLocation)
        #expect(try await second.lockKey("h1", runner: "two"), "the key is free while the hooks run", sourceLocation: sourceLocation)
        try await second.unlockKeys(["h1"], runner: "two")
        try await second.release(ids: [hooked[0].id], runner: "one")  // a job whose record is stored never goes back to the queue
        #expect(try await second.claim(runner: "two", limit: 5, kinds: ["hooked"]).isEmpty, "its lease holds", sourceLocation: sourceLocation)
        try await second.hooksEnded(ids: [hooked[0].id], runner: "two")  // not its claim: nothing
        try await first.hooksEnded(ids: [hooked[0].id], runner: "one")

        // The queue has one id and, once a watcher stamped one, one output folder: the first to
        // record its folder's id wins, for every runner.
        let before = try await first.identity()
        #expect(!before.id.isEmpty && before.folder == nil, "\(before)", sourceLocation: sourceLocation)
        let won = try await first.recordOutput(folder: "f1", path: "/srv/out", runner: "one")
        let lost = try await second.recordOutput(folder: "f2", path: "/elsewhere", runner: "two")
        #expect(won == QueueIdentity(id: before.id, folder: "f1", output: "/srv/out", stampedBy: "one"), "\(won)", sourceLocation: sourceLocation)
        #expect(lost == won, "\(lost)", sourceLocation: sourceLocation)

        // Leases: renewed, they hold; not renewed, they end and the job can be claimed again.
        let leaseEnd = try await first.nextLeaseEnd()
        #expect(leaseEnd.map { $0 <= lease && $0 > .zero } == true, "\(String(describing: leaseEnd))", sourceLocation: sourceLocation)
        await pass(lease / 2)
        try await first.heartbeat(runner: "one")
        try await second.heartbeat(runner: "two")
        await pass(lease / 2 + lease / 4)
        #expect(try await second.claim(runner: "two", limit: 5).isEmpty, "the claims were renewed", sourceLocation: sourceLocation)
        await pass(lease / 2)
        let reclaimed = try await second.claim(runner: "two", limit: 5)
        #expect(reclaimed.map(\.key) == ["k1", "k1", "k3"], "the leases ended: \(reclaimed)", sourceLocation: sourceLocation)

        // Claimed three times and abandoned: failed, never claimed a fourth time.
        await pass(lease + lease / 4)
        #expect(try await first.claim(runner: "three", limit: 5).count == 3, sourceLocation: sourceLocation)
        await pass(lease + lease / 4)
        #expect(try await first.failAbandoned().failed == 2, "k1 and k3, each claimed by three runners that went", sourceLocation: sourceLocation)
        // The second k1 waited for its key while the first ran, and was claimed twice since.
        #expect(try await second.claim(runner: "four", limit: 5).map(\.key) == ["k1"], sourceLocation: sourceLocation)
        await pass(lease + lease / 4)
        #expect(try await first.failAbandoned().failed == 1, sourceLocation: sourceLocation)
        #expect(try await second.claim(runner: "four", limit: 5).isEmpty, sourceLocation: sourceLocation)

        // A claim that made durable progress is credited, once, and is no abandon: abandoned by
        // three runners, one of which moved it forward, the job is claimed a fourth time.
        try await submit(Self.jobs(["c1"]))
        var progressed = try await first.claim(runner: "p1", limit: 5)
        #expect(progressed.map(\.key) == ["c1"], sourceLocation: sourceLocation)
        try await first.credit(ids: [progressed[0].id], runner: "p1")
        try await first.credit(ids: [progressed[0].id], runner: "p1")  // the same claim: once
        try await first.credit(ids: [progressed[0].id], runner: "p2")  // not its claim: nothing
        for runner in ["p2", "p3"] {
            await pass(lease + lease / 4)
            #expect(try await first.failAbandoned().failed == 0, sourceLocation: sourceLocation)
            progressed = try await second.claim(runner: runner, limit: 5)
            #expect(progressed.map(\.key) == ["c1"], "\(runner)", sourceLocation: sourceLocation)
        }
        await pass(lease + lease / 4)
        #expect(try await first.failAbandoned().failed == 0, "two abandons and one credited claim", sourceLocation: sourceLocation)
        #expect(try await second.claim(runner: "p4", limit: 5).map(\.key) == ["c1"], sourceLocation: sourceLocation)
        await pass(lease + lease / 4)
        #expect(try await first.failAbandoned().failed == 1, "three abandons without progress", sourceLocation: sourceLocation)
        #expect(try await second.nextLeaseEnd() == nil, "nothing runs", sourceLocation: sourceLocation)

        // The fleet's pace: slots an interval apart whoever asks; a pause pushes them back and is told.
        let interval = Duration.milliseconds(500)
        let a = try await first.reservePace(host: "h.test", interval: interval)
        let b = try await second.reservePace(host: "h.test", interval: interval)
        #expect(a <= .milliseconds(50) && b >= interval - .milliseconds(100) && b <= interval + .milliseconds(50), "\(a) \(b)", sourceLocation: sourceLocation)
        try await first.pause(host: "p.test", for: .seconds(10), from: "one")
        let paused = try await second.reservePace(host: "p.test", interval: interval)
        #expect(paused >= .seconds(9), "\(paused)", sourceLocation: sourceLocation)
        // Read until it comes: notices of new jobs sent before it (a release, a key let go of
        // while a job waits for it) may be all that one read returns.
        let told = QueueNotice.pause(host: "p.test", milliseconds: 10_000, runner: "one")
        var notices = try await second.notifications(waitingUpTo: .seconds(1))
        for _ in 0..<5 where !notices.contains(told) { notices += try await second.notifications(waitingUpTo: .seconds(1)) }
        #expect(notices.contains(told), "\(notices)", sourceLocation: sourceLocation)

        // A runner claims only the kinds it has loaded; every claim carries the fleet's pauses.
        try await submit([
            QueueSubmission(key: "x1", kind: "elsewhere", job: #"{"job": {"kind": "elsewhere", "key": "x1"}}"#, file: "contract"),
            QueueSubmission(key: "x2", kind: "mine", job: #"{"job": {"kind": "mine", "key": "x2"}}"#, file: "contract"),
        ])
        let onlyMine = try await first.claim(runner: "five", limit: 5, kinds: ["mine"])
        #expect(onlyMine.map(\.key) == ["x2"], sourceLocation: sourceLocation)
        let pause = onlyMine.first?.pauses.first { $0.host == "p.test" }
        #expect(pause.map { $0.left >= .seconds(8) && $0.left <= .seconds(10) } == true, "\(onlyMine.first?.pauses ?? [])", sourceLocation: sourceLocation)
        #expect(try await second.claim(runner: "six", limit: 5, kinds: ["fetch", "mine"]).isEmpty, "x1 waits for a runner of its kind", sourceLocation: sourceLocation)
        #expect(try await second.claim(runner: "six", limit: 5).map(\.key) == ["x1"], sourceLocation: sourceLocation)

        // Hooks left by three runners: the job keeps its own status, its hooks failed, said.
        try await submit([QueueSubmission(key: "h2", kind: "hooked2", job: #"{"job": {"kind": "hooked2", "key": "h2"}}"#, file: "contract")])
        let ran = try await first.claim(runner: "r0", limit: 5, kinds: ["hooked2"])
        #expect(ran.map(\.key) == ["h2"], sourceLocation: sourceLocation)
        let h2 = #"{"key":"h2","kind":"hooked2","status":"succeeded"}"#
        _ = try await first.finish(
            [QueueFinish(id: ran[0].id, status: "succeeded", error: nil, record: h2, hooksPending: true)], runner: "r0", unlocking: ["h2"])
        for runner in ["r1", "r2", "r3"] {
            await pass(lease + lease / 4)
            #expect(try await first.failAbandoned().hooksFailed.isEmpty, "\(runner)", sourceLocation: sourceLocation)
            let forHooks = try await second.claim(runner: runner, limit: 5, kinds: ["hooked2"])
            #expect(forHooks.map(\.key) == ["h2"] && forHooks.first?.outcome == h2, "\(runner): for its hooks alone", sourceLocation: sourceLocation)
        }
        await pass(lease + lease / 4)
        let left = try await first.failAbandoned()
        #expect(left.failed == 0 && left.hooksFailed.map(\.key) == ["h2"] && left.hooksFailed.first?.record == h2, "\(left.hooksFailed)", sourceLocation: sourceLocation)
        #expect(left.hooksFailed.first?.reason.contains("left by 3 runners") == true, sourceLocation: sourceLocation)
        #expect(try await second.claim(runner: "r4", limit: 5, kinds: ["hooked2"]).isEmpty, "not a fourth time", sourceLocation: sourceLocation)

        // Finished rows older than --keep go.
        await pass(.seconds(1))
        #expect(try await first.prune(olderThan: .milliseconds(500)) >= 2, sourceLocation: sourceLocation)
    }
}

/// What a live page asks of a queue store (`QueueProducing`), checked the same way on both
/// stores: files queued as one batch with unique keys left out, the fleet's status as claims and
/// records change it, a cancel that ends the queued jobs and names the runner of a running one.
package struct QueueProducingContract {
    /// The page's store, and a watcher's view of the same empty queue.
    package let page: any QueueStore & QueueProducing
    package let watcher: any QueueFeed.Store

    package init(page: any QueueStore & QueueProducing, watcher: any QueueFeed.Store) {
        self.page = page
        self.watcher = watcher
    }

    package func check(sourceLocation: SourceLocation = #_sourceLocation) async throws {
        func job(_ key: String, unique: Bool = false) -> QueueSubmission {
            QueueSubmission(key: key, kind: "fetch", job: #"{"job": {"kind": "fetch", "key": "\#(key)"}}"#, file: "page.jsonl", unique: unique)
        }
        let empty = try await page.producerStatus().status
        #expect(empty.queued == 0 && empty.running.isEmpty && empty.done == 0, sourceLocation: sourceLocation)

        let queued = try await page.queueJobs([job("p1"), job("p2"), job("p3", unique: true), job("p3", unique: true)])
        #expect(queued.inserted == 3 && queued.leftOut.map(\.key) == ["p3"], "\(queued)", sourceLocation: sourceLocation)
        #expect(try await page.queueJobs([job("p1", unique: true)]).inserted == 0, "p1 is queued", sourceLocation: sourceLocation)
        #expect(try await page.producerStatus().status.queued == 3, sourceLocation: sourceLocation)

        let claimed = try await watcher.claim(runner: "w1", limit: 2)
        #expect(claimed.map(\.key) == ["p1", "p2"], sourceLocation: sourceLocation)
        try await watcher.finish(
            [QueueFinish(id: claimed[1].id, status: "succeeded", error: nil, record: #"{"key":"p2","status":"succeeded"}"#)],
            runner: "w1", unlocking: ["p2"])
        let status = try await page.producerStatus().status
        #expect(status.queued == 1 && status.done == 1, "\(status)", sourceLocation: sourceLocation)
        #expect(status.running.map(\.key) == ["p1"] && status.running.first?.runner == "w1", "\(status.running)", sourceLocation: sourceLocation)

        // A cancel: the queued job ends cancelled, the running one's runner is named.
        let queuedOne = try await page.cancelJobs(key: "p3")
        #expect(queuedOne.queued == 1 && queuedOne.running.isEmpty, "\(queuedOne)", sourceLocation: sourceLocation)
        let runningOne = try await page.cancelJobs(key: "p1")
        #expect(runningOne.queued == 0 && runningOne.running == ["w1"], "\(runningOne)", sourceLocation: sourceLocation)
        let nothing = try await page.cancelJobs(key: "p-none")
        #expect(nothing.queued == 0 && nothing.running.isEmpty, sourceLocation: sourceLocation)
        let after = try await page.producerStatus().status
        #expect(after.queued == 0 && after.cancelled == 1, "\(after)", sourceLocation: sourceLocation)
    }
}
