import FixtureServer
import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// A real PostgreSQL for the test (Debian's postgresql): `initdb` into a temporary folder as the
/// unprivileged `postgres` user, the server on a unix socket in that folder, no TCP; a password
/// (scram-sha-256) so that a wrong one can be tried. Stopped and removed at the end.
final class PostgresServer: @unchecked Sendable {
    static let bin: String? = {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).sorted { (Int($0) ?? 0) > (Int($1) ?? 0) }
        return versions.map { "\(root)/\($0)/bin" }.first { FileManager.default.isExecutableFile(atPath: "\($0)/initdb") }
    }()

    let folder: String
    let password = "s3cret-pw"
    /// Stops the server if the test process exits before this value goes (a crash of the test).
    private var stopAtExit: UUID?

    init() async throws {
        guard let bin = Self.bin else { throw Workspace.Missing(what: "postgresql is not installed (Debian: apt-get install postgresql; .ci/run installs it)") }
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("runner-pg-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: "\(folder)/pw", contents: Data((password + "\n").utf8))
        try await Self.sh("chown -R postgres \(folder) && chmod 755 \(folder)")
        try await Self.sh("runuser -u postgres -- \(bin)/initdb -D \(folder)/data -U runner --pwfile=\(folder)/pw -A scram-sha-256 > \(folder)/initdb.log 2>&1")
        let folder = folder
        stopAtExit = ChildProcess.atExit { Self.stop(folder) }
        try await start()
    }

    func start() async throws {
        try await Self.sh("runuser -u postgres -- \(Self.bin!)/pg_ctl -D \(folder)/data -o \"-k \(folder) -c listen_addresses=''\" -l \(folder)/server.log -w start > /dev/null")
    }

    func restart() async throws {
        try await Self.sh("runuser -u postgres -- \(Self.bin!)/pg_ctl -D \(folder)/data -o \"-k \(folder) -c listen_addresses=''\" -l \(folder)/server.log -w -m fast restart > /dev/null")
    }

    /// Stopped and removed on a thread of its own, not the test's; if the test process exits
    /// first, the stop at exit still runs.
    deinit {
        let (folder, stopAtExit) = (folder, stopAtExit)
        Thread.detachNewThread {
            Self.stop(folder)
            try? FileManager.default.removeItem(atPath: folder)
            if let stopAtExit { ChildProcess.cancelAtExit(stopAtExit) }
        }
    }

    /// Stops the server of `folder`: pg_ctl's immediate stop, then SIGKILL to the postmaster named
    /// in postmaster.pid if it is still there (its children end with it).
    private static func stop(_ folder: String) {
        _ = try? ChildProcess.runBlocking("/bin/sh", ["-c", "runuser -u postgres -- \(bin!)/pg_ctl -D \(folder)/data -m immediate -w stop > /dev/null 2>&1"])
        if let text = try? String(contentsOfFile: "\(folder)/data/postmaster.pid", encoding: .utf8),
            let pid = text.split(separator: "\n").first.flatMap({ Int32($0) }), pid > 0
        {
            kill(pid, SIGKILL)
        }
    }

    var url: String { "postgresql://runner:\(password)@/postgres?host=\(folder)" }

    /// Runs one SQL statement with psql as the runner's role; what it printed.
    func psql(_ statement: String) async throws -> String {
        let result = try await ChildProcess.run(
            "\(Self.bin!)/psql", ["-X", "-q", "-t", "-A", "-h", folder, "-U", "runner", "-d", "postgres", "-c", statement],
            environment: ChildProcess.environment(adding: ["PGPASSWORD": password]))
        guard result.status == 0 else { throw Workspace.Missing(what: "psql failed (\(result.status)): \(statement)\n\(result.output)") }
        return result.output
    }

    /// Runs `command` with /bin/sh to its end; throws if it fails.
    static func sh(_ command: String) async throws {
        let result = try await ChildProcess.run("/bin/sh", ["-c", command])
        guard result.status == 0 else { throw Workspace.Missing(what: "failed (\(result.status)): \(command)\n\(result.output)") }
    }
}

/// `--queue` through the binary against a real PostgreSQL: several watcher processes sharing one
/// queue and its one output folder.
@Suite(.startsProcesses, .serialized, .timeLimit(.minutes(3)), .enabled(if: PostgresServer.bin != nil, "postgresql is not installed"))
struct QueueTests {
    static func jobs(_ world: SpoolWorld, _ count: Int, prefix: String, delay: Int, keys: Int? = nil) -> String {
        (0..<count).map { index in
            let key = keys.map { "\(prefix)\(index % $0)" } ?? "\(prefix)\(index)"
            return #"{"kind": "entry", "key": "\#(key)", "id": "imgly.A.1", "url": "\#(world.base)/entries/{id}.json?delay=\#(delay)&n=\#(index)", "timeout": 30}"#
        }.joined(separator: "\n") + "\n"
    }

    /// A watcher whose stderr goes to `<name>.stderr`, writing into the queue's output folder
    /// (`out` under the world's root, unless `out` names another).
    static func startWatcher(
        _ world: SpoolWorld, _ db: PostgresServer, _ name: String, lease: Double = 30, _ extra: [String] = [], environment: [String: String] = [:],
        out: String = "out"
    ) throws -> ChildProcess {
        try ChildProcess(
            RunnerBinary.path, ["watch", "--queue", db.url, "--out", "\(world.w.root)/\(out)", "--rescan", "30"] + extra,
            environment: ChildProcess.environment(adding: ["RUNNER_QUEUE_LEASE": String(lease)].merging(environment) { $1 }),
            stdout: .null, stderr: .file("\(world.w.root)/\(name).stderr"))
    }

    /// The status of each key's record in the queue's output folder.
    static func records(_ world: SpoolWorld) -> [String: String] {
        let folder = "\(world.w.root)/out/results"
        var found: [String: String] = [:]
        for file in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] where file.hasSuffix(".json") {
            if let record = try? JSONParser.parse(Array(FileManager.default.contents(atPath: "\(folder)/\(file)") ?? Data())),
                let key = record["key"]?.stringValue
            {
                found[key] = record["status"]?.stringValue
            }
        }
        return found
    }

    /// How many finished jobs each runner ran (of keys starting with `prefix`), by runner name.
    static func ranBy(_ db: PostgresServer, prefix: String = "") async throws -> [String: Int] {
        let rows = try await db.psql(
            "SELECT runner || ' ' || count(*) FROM runner.jobs WHERE state = 'done' AND starts_with(key, '\(prefix)') GROUP BY runner")
        var found: [String: Int] = [:]
        for line in rows.split(separator: "\n") {
            let words = line.split(separator: " ")
            if words.count == 2 { found[String(words[0])] = Int(words[1]) }
        }
        return found
    }

    /// The name a watcher process runs under (`host-pid`).
    static func name(_ watcher: ChildProcess, in ranBy: [String: Int]) -> String? {
        ranBy.keys.first { $0.hasSuffix("-\(watcher.processIdentifier)") }
    }

    static func status(_ world: SpoolWorld, _ db: PostgresServer) async throws -> JSONValue {
        let result = try await world.w.run(["status", "--queue", db.url, "--json"])
        return try JSONParser.parse(result.stdout)
    }

    /// `status --queue --json`, asked every 200 ms until `condition` holds or `timeout` passed
    /// (the last answer either way; a database restarting answers `.null` meanwhile).
    static func status(
        _ world: SpoolWorld, _ db: PostgresServer, upTo timeout: Duration, until condition: (JSONValue) -> Bool
    ) async throws -> JSONValue {
        let end = ContinuousClock.now + timeout
        var status: JSONValue = .null
        while true {
            status = (try? await Self.status(world, db)) ?? .null
            if condition(status) || ContinuousClock.now >= end { return status }
            try await Task.sleep(for: .milliseconds(200))
        }
    }

    static func count(_ status: JSONValue, _ name: String) -> Int { status[name]?["count"]?.intValue ?? 0 }

    static func stop(_ process: ChildProcess, _ world: SpoolWorld) async -> Int32? {
        kill(process.processIdentifier, SIGTERM)
        return await world.exit(of: process, upTo: .seconds(20))
    }

    /// The libpq store keeps the contract the in-memory store keeps (QueueFeedTests runs the
    /// feed's logic on that one); a lease of 1 s, on the real clock.
    @Test func theLibpqStoreKeepsTheQueuesContract() async throws {
        let db = try await PostgresServer()
        let first = try await PostgresQueueStore.connect(url: db.url, lease: .seconds(1))
        let second = try await PostgresQueueStore.connect(url: db.url, lease: .seconds(1))
        defer {
            first.close()
            second.close()
        }
        let submitter = try JobQueue(url: db.url)
        let contract = QueueStoreContract(
            first: first, second: second, submit: { try submitter.submit($0) }, pass: { try? await Task.sleep(for: $0) })
        try await contract.check()
    }

    @Test func submitQueuesEveryJobOfItsFilesOrNone() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let good = world.w.write("good.jsonl", Self.jobs(world, 5, prefix: "q:good", delay: 0))
        let bad = world.w.write("bad.jsonl", #"{"kind": "entry", "key": "q:bad", "url": "http://x.test/{id}"}"# + "\n")
        let refused = try await world.w.run(["submit", "--queue", db.url, good, bad])
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("Nothing was queued"))
        #expect(try await Self.status(world, db)["queued"]?["count"]?.intValue == 0)
        // A submitter may not read the watchers' environment or files; nor pass a key over 1 KiB.
        let secret = world.w.write("secret.json", #"{"kind": "entry", "key": "q:s", "id": "1", "url": "\#(world.base)/entries/{id}.json", "headers": {"a": "{env:PGPASSWORD}"}}"#)
        let long = world.w.write("long.json", #"{"kind": "entry", "key": "\#(String(repeating: "k", count: 1025))", "id": "1", "url": "\#(world.base)/entries/{id}.json"}"#)
        let secretRefused = try await world.w.run(["submit", "--queue", db.url, secret])
        #expect(secretRefused.status == 2 && secretRefused.stderr.contains("{env:PGPASSWORD} is not expanded in a job a watcher runs"), "\(secretRefused.stderr)")
        let longRefused = try await world.w.run(["submit", "--queue", db.url, long])
        #expect(longRefused.status == 2 && longRefused.stderr.contains("a key is at most 1024 bytes"), "\(longRefused.stderr)")
        #expect(try await Self.status(world, db)["queued"]?["count"]?.intValue == 0)

        let queued = try await RunnerBinary.runExecutable(RunnerBinary.path, ["submit", good], in: world.w.root, environment: ["RUNNER_QUEUE": db.url])
        #expect(queued.status == 0, "\(queued.stderr)")
        #expect(queued.stdout.contains("(5 jobs)"))
        #expect(!queued.stdout.contains(db.password), "the password is never printed")
        let status = try await Self.status(world, db)
        #expect(status["queued"]?["count"]?.intValue == 5, "\(status)")
        let version = try await world.w.run(["--version"])
        #expect(version.stdout.contains("libpq 1"), "\(version.stdout)")
    }

    /// Any byte a server sends can be stored: an error text holding NUL (a duplicate member
    /// name with a NUL in it) reaches the database with the records of its batch.
    @Test func aRecordHoldingNULIsStoredAndHoldsNoOtherRecord() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let poison = #"{"a\u0000b":1,"a\u0000b":2}"#.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let file = world.w.write("nul.jsonl", #"{"kind": "json", "key": "q:nul", "url": "\#(world.base)/say?text=\#(poison)"}"# + "\n"
            + Self.jobs(world, 4, prefix: "q:fine", delay: 0))
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        let watcher = try Self.startWatcher(world, db, "out")
        defer { watcher.terminate() }
        let status = try await Self.status(world, db, upTo: .seconds(20)) { Self.count($0, "failed") == 1 && Self.count($0, "done") == 4 }
        #expect(Self.count(status, "failed") == 1 && Self.count(status, "done") == 4, "\(status)")
        #expect(status["running"]?.arrayValue?.isEmpty == true && Self.count(status, "queued") == 0, "\(status)")
        let reason = status["failed"]?["latest"]?["reason"]?.stringValue ?? ""
        #expect(reason.contains("duplicate member") && reason.contains("a\u{FFFD}b"), "NUL shown as U+FFFD: \(reason.debugDescription)")
        #expect(!world.log("out").contains("could not be stored"), "\(world.log("out"))")
        #expect(await Self.stop(watcher, world) == 0)
    }

    @Test func threeWatchersShareTheJobsAndEachIsFetchedOnce() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let file = world.w.write("many.jsonl", Self.jobs(world, 300, prefix: "q:many", delay: 5))
        let watchers = try (1...3).map { try Self.startWatcher(world, db, "watcher\($0)") }
        defer { watchers.forEach { if $0.isRunning { $0.terminate() } } }
        // All three listening before the jobs come, so a slow start cannot leave one out.
        let listening = await world.wait(upTo: .seconds(20)) { (1...3).allSatisfy { world.log("watcher\($0)").contains("watching the queue") } }
        #expect(listening, "\((1...3).map { world.log("watcher\($0)") })")
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        let done = await world.wait(upTo: .seconds(60)) { Self.records(world).count >= 300 }
        #expect(done, "\(Self.records(world).count)")
        #expect(Self.records(world).values.allSatisfy { $0 == "succeeded" }, "every key's record in the one output folder")
        #expect(world.w.server.arrivals(pathPrefix: "/entries/").count == 300, "each job fetched once")
        // A record is on disk before it is in the queue: the rows follow within moments.
        let status = try await Self.status(world, db, upTo: .seconds(10)) { Self.count($0, "done") == 300 }
        #expect(status["done"]?["count"]?.intValue == 300, "\(status)")
        let ranBy = try await Self.ranBy(db)
        #expect(ranBy.count == 3, "every watcher took some: \(ranBy)")
        for watcher in watchers { #expect(await Self.stop(watcher, world) == 0) }
    }

    @Test func aWatcherKilledWhileRunningHasItsJobsRunByAnotherAfterTheLease() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let file = world.w.write("slow.jsonl", Self.jobs(world, 4, prefix: "q:slow", delay: 4000))
        let first = try Self.startWatcher(world, db, "first", lease: 2, ["--concurrency", "4"])
        defer { if first.isRunning { first.terminate() } }
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        let running = await world.wait(upTo: .seconds(20)) {
            world.w.server.arrivals(pathPrefix: "/entries/").count == 4
        }
        #expect(running)
        kill(first.processIdentifier, SIGKILL)
        _ = await world.exit(of: first, upTo: .seconds(5))
        // Once their lease ended, status says their watcher left them.
        let left = try await Self.status(world, db, upTo: .seconds(10)) { $0["abandoned"]?.intValue == 4 }
        #expect(left["abandoned"]?.intValue == 4, "\(left)")
        let second = try Self.startWatcher(world, db, "second", lease: 2)
        defer { if second.isRunning { second.terminate() } }
        let taken = try await Self.status(world, db, upTo: .seconds(20)) { $0["reclaimed"]?.intValue == 4 }
        #expect(taken["reclaimed"]?.intValue == 4 && taken["abandoned"]?.intValue == 0, "running again on the second: \(taken)")
        let recovered = await world.wait(upTo: .seconds(40)) { Self.records(world).count == 4 }
        #expect(recovered, "\(Self.records(world)) \(world.log("second"))")
        #expect(Self.records(world).values.allSatisfy { $0 == "succeeded" })
        // A record is on disk before it is in the queue: the rows follow within moments.
        let status = try await Self.status(world, db, upTo: .seconds(10)) { Self.count($0, "done") == 4 }
        #expect(status["done"]?["count"]?.intValue == 4 && status["running"]?.arrayValue?.isEmpty == true, "\(status)")
        let ranBy = try await Self.ranBy(db)
        #expect(ranBy.count == 1 && Self.name(second, in: ranBy) != nil, "the killed watcher ended none: \(ranBy)")
        #expect(await Self.stop(second, world) == 0)
    }

    @Test func theDatabaseRestartedWhileJobsRunLosesNoRecordAndRunsNoJobTwice() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let watcher = try Self.startWatcher(world, db, "out", ["--concurrency", "4"])
        defer { if watcher.isRunning { watcher.terminate() } }
        let file = world.w.write("restart.jsonl", Self.jobs(world, 20, prefix: "q:restart", delay: 600))
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        #expect(await world.wait(upTo: .seconds(20)) { world.w.server.arrivals(pathPrefix: "/entries/").count >= 4 })
        try await db.restart()
        let status = try await Self.status(world, db, upTo: .seconds(30)) { Self.count($0, "done") == 20 }
        #expect(status["done"]?["count"]?.intValue == 20, "every record in the database: \(status) \(world.log("out"))")
        #expect(Self.records(world).count == 20, "and on disk")
        #expect(world.w.server.arrivals(pathPrefix: "/entries/").count == 20, "none fetched twice")
        let log = world.log("out")
        #expect(log.contains("notices stopped") || log.contains("could not be read") || log.contains("could not be stored"), "the outage is said: \(log)")
        #expect(log.split(separator: "\n").allSatisfy { $0.hasPrefix("runner: ") }, "every line in the runner's words, libpq's too: \(log)")
        // One line once the jobs of the file had all ended: the 20.
        let ended = {
            world.log("out").split(separator: "\n").filter { $0.hasPrefix("runner: restart.jsonl: its jobs ended; ") }
                .compactMap { line in line.split(separator: " ").last.flatMap { _ in Int(line.split(separator: "; ").last?.split(separator: " ").first ?? "") } }
                .reduce(0, +)
        }
        #expect(await world.wait(upTo: .seconds(10)) { ended() == 20 }, "\(world.log("out"))")
        #expect(world.log("out").components(separatedBy: "restart.jsonl: its jobs ended").count == 2, "one line: \(world.log("out"))")
        #expect(await Self.stop(watcher, world) == 0)
    }

    @Test func cancelReachesTheRunningTaskOnItsWatcherAndTheQueuedJobsOfTheKey() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let watcher = try Self.startWatcher(world, db, "out", ["--concurrency", "1"])
        defer { if watcher.isRunning { watcher.terminate() } }
        let file = world.w.write("cancel.jsonl", Self.jobs(world, 3, prefix: "q:cancel", delay: 20_000, keys: 1))
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        #expect(await world.wait(upTo: .seconds(20)) { world.w.server.arrivals(pathPrefix: "/entries/").count == 1 })
        let cancel = try await world.w.run(["cancel", "q:cancel0", "--queue", db.url])
        let asked = ContinuousClock.now
        #expect(cancel.status == 0, "\(cancel.stderr)")
        #expect(cancel.stdout.contains("its running task"), "\(cancel.stdout)")
        #expect(await world.wait(upTo: .seconds(15)) { Self.records(world)["q:cancel0"] == "cancelled" }, "\(world.log("out"))")
        #expect(asked.duration(to: .now) < .seconds(15), "the running task ended soon after the cancel, not after its 20 s: \(asked.duration(to: .now))")
        // The other two (queued, or claimed and waiting for a slot) end cancelled without running.
        let status = try await Self.status(world, db, upTo: .seconds(10)) { Self.count($0, "cancelled") == 3 }
        #expect(status["cancelled"]?["count"]?.intValue == 3, "\(status)")
        #expect(world.w.server.arrivals(pathPrefix: "/entries/").count == 1, "the other two never ran")
        let nothing = try await world.w.run(["cancel", "q:nothing", "--queue", db.url])
        #expect(nothing.status == 1)
        #expect(await Self.stop(watcher, world) == 0)
    }

    /// Jobs over `keys` keys, each key its own entry (so the server's arrivals tell keys apart).
    static let entryIDs = ["imgly.A.1", "imgly.A.2", "imgly.A.3", "imgly.B.1"]

    @Test func oneTaskPerKeyHoldsAcrossWatchers() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let jobs = (0..<24).map { index in
            let id = Self.entryIDs[index % 4]
            return #"{"kind": "entry", "key": "q:key\#(index % 4)", "id": "\#(id)", "url": "\#(world.base)/entries/{id}.json?delay=300&n=\#(index)", "timeout": 30}"#
        }
        let file = world.w.write("keys.jsonl", jobs.joined(separator: "\n") + "\n")
        let watchers = try (1...3).map { try Self.startWatcher(world, db, "out\($0)", ["--concurrency", "4"]) }
        defer { watchers.forEach { if $0.isRunning { $0.terminate() } } }
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        let status = try await Self.status(world, db, upTo: .seconds(30)) { Self.count($0, "done") + Self.count($0, "failed") == 24 }
        #expect(Self.count(status, "done") + Self.count(status, "failed") == 24, "\(status)")
        // A job of a key running on another watcher waits for it: none overlaps at the server,
        // and every one runs (none ends duplicate).
        var fetched = 0
        for id in Self.entryIDs {
            let arrivals = world.w.server.arrivals(pathPrefix: "/entries/\(id).json").sorted()
            fetched += arrivals.count
            #expect(!arrivals.isEmpty)
            for (earlier, later) in zip(arrivals, arrivals.dropFirst()) {
                #expect(earlier.duration(to: later) >= .milliseconds(290), "two jobs of one key overlapped: \(earlier.duration(to: later))")
            }
        }
        let succeeded = status["done"]?["count"]?.intValue ?? 0
        #expect(fetched == 24 && succeeded == 24, "fetched \(fetched), succeeded \(succeeded): \(status)")
        for watcher in watchers { #expect(await Self.stop(watcher, world) == 0) }
    }

    @Test func rateHoldsForTheWholeFleet() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let file = world.w.write("paced.jsonl", Self.jobs(world, 24, prefix: "q:paced", delay: 0))
        let watchers = try (1...3).map { try Self.startWatcher(world, db, "watcher\($0)", ["--rate", "4", "--concurrency", "8"]) }
        defer { watchers.forEach { if $0.isRunning { $0.terminate() } } }
        let listening = await world.wait(upTo: .seconds(20)) { (1...3).allSatisfy { world.log("watcher\($0)").contains("watching the queue") } }
        #expect(listening, "\((1...3).map { world.log("watcher\($0)") })")
        let submitted = ContinuousClock.now
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        let done = await world.wait(upTo: .seconds(40)) { Self.records(world).count >= 24 }
        #expect(done, "\(Self.records(world).count)")
        #expect(Self.records(world).values.allSatisfy { $0 == "succeeded" })
        let ranBy = try await Self.ranBy(db)
        #expect(ranBy.count == 3, "every watcher ran some: \(ranBy)")
        let arrivals = world.w.server.arrivals(pathPrefix: "/entries/")
        #expect(arrivals.count == 24)
        let busiest = RateTests.busiestSecond(arrivals)
        #expect(busiest <= RateTests.allowed(rate: 4), "three watchers at --rate 4 share one pace: \(busiest) requests within one second")
        let span = RateTests.span(since: submitted, arrivals)
        #expect(span >= .milliseconds(5600), "24 requests 250 ms apart take 5.75 s (each watcher on its own, 1.75 s): \(span)")
        for watcher in watchers { #expect(await Self.stop(watcher, world) == 0) }
    }

    @Test func a429SeenByOneWatcherPausesTheHostForAll() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let watchers = try (1...2).map { try Self.startWatcher(world, db, "watcher\($0)", ["--concurrency", "1"]) }
        defer { watchers.forEach { if $0.isRunning { $0.terminate() } } }
        let limited = world.w.write(
            "limited.jsonl",
            #"{"kind": "entry", "key": "q:limited", "id": "imgly.A.1", "url": "\#(world.base)/entries/{id}.json?status=429&retryAfter=3", "retries": 0}"# + "\n")
        #expect(try await world.w.run(["submit", "--queue", db.url, limited]).status == 0)
        // Its record is written after the pause was taken and told to the fleet.
        #expect(await world.wait(upTo: .seconds(20)) { Self.records(world)["q:limited"] != nil })
        let limitedAt = try #require(world.w.server.arrivals(pathPrefix: "/entries/").first)
        let paused = try await Self.status(world, db)["pausedHosts"]?.arrayValue?.first
        #expect(paused?["host"]?.stringValue == "127.0.0.1" && (paused?["leftMs"]?.intValue ?? 0) > 0, "the fleet holds the host back: \(String(describing: paused))")
        let file = world.w.write("others.jsonl", Self.jobs(world, 8, prefix: "q:other", delay: 0))
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        let done = await world.wait(upTo: .seconds(30)) { Self.records(world).count >= 9 }
        #expect(done)
        _ = try await Self.status(world, db, upTo: .seconds(10)) { Self.count($0, "done") >= 8 }  // the rows follow the records
        let ranBy = try await Self.ranBy(db, prefix: "q:other")
        #expect(ranBy.count == 2, "both watchers ran some of the others: \(ranBy)")
        let others = world.w.server.arrivals(pathPrefix: "/entries/").dropFirst()
        #expect(others.count == 8)
        for arrival in others {
            #expect(limitedAt.duration(to: arrival) >= .milliseconds(2900), "sent during the pause: \(limitedAt.duration(to: arrival))")
        }
        for watcher in watchers { #expect(await Self.stop(watcher, world) == 0) }
    }

    /// A watcher claims only the kinds it has loaded: a job of another kind waits for a watcher
    /// that has it, and `status` lists the watchers and says why the job waits.
    @Test func aJobWaitsForAWatcherThatHasItsKindAndStatusSaysSo() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let kinds = "\(FileKindTests.jobs)/kinds"
        let plain = try Self.startWatcher(world, db, "plain")
        defer { if plain.isRunning { plain.terminate() } }
        #expect(await world.wait(upTo: .seconds(10)) { world.log("plain").contains("watching the queue") })
        let file = world.w.write(
            "declared.jsonl", #"{"kind": "json-entry", "key": "q:declared", "id": "imgly.A.1", "url": "\#(world.base)/entries/{id}.json"}"# + "\n")
        #expect(try await world.w.run(["submit", "--queue", db.url, "--kinds", kinds, file]).status == 0)

        let waiting = try await Self.status(world, db, upTo: .seconds(10)) { status in
            status["queued"]?["noWatcherForKind"]?.arrayValue?.first?["kind"]?.stringValue == "json-entry"
        }
        #expect(waiting["queued"]?["noWatcherForKind"]?.arrayValue?.first?["count"]?.intValue == 1, "\(waiting)")
        let listed = waiting["watchers"]?.arrayValue ?? []
        #expect(listed.count == 1 && listed.first?["live"] == .bool(true), "\(listed)")
        #expect(listed.first?["kinds"]?.arrayValue?.contains(.string("entry")) == true, "\(listed)")
        let text = try await world.w.run(["status", "--queue", db.url])
        #expect(text.stdout.contains("1 of kind json-entry: no live watcher has this kind loaded"), "\(text.stdout)")
        #expect(text.stdout.contains("watchers: 1"), "\(text.stdout)")
        try await Task.sleep(for: .seconds(1))
        #expect(Self.records(world).isEmpty, "the watcher without the kind left it alone")

        let declaring = try Self.startWatcher(world, db, "declaring", ["--kinds", kinds])
        defer { if declaring.isRunning { declaring.terminate() } }
        #expect(await world.wait(upTo: .seconds(20)) { Self.records(world)["q:declared"] == "succeeded" })
        #expect(await Self.stop(declaring, world) == 0)
        #expect(await Self.stop(plain, world) == 0)
        let after = try await Self.status(world, db)
        #expect(after["watchers"]?.arrayValue?.isEmpty == true, "watchers that stopped are off the list: \(after)")
    }

    /// A submit is a batch: its id printed, `status --batch` counting its jobs, `--wait` ending
    /// with run's counts and exit codes; `--unique` (or `"unique": true`) leaves out a job whose
    /// key is queued or running.
    @Test func aBatchIsFollowedWaitedForAndKeptUnique() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let watcher = try Self.startWatcher(world, db, "out")
        defer { if watcher.isRunning { watcher.terminate() } }
        #expect(await world.wait(upTo: .seconds(10)) { world.log("out").contains("watching the queue") })
        func entry(_ key: String, _ query: String = "") -> String {
            #"{"kind": "entry", "key": "\#(key)", "id": "imgly.A.1", "url": "\#(world.base)/entries/{id}.json\#(query)", "timeout": 10}"#
        }
        let mixed = world.w.write("mixed.jsonl", entry("q:good") + "\n" + entry("q:gone", "?status=404") + "\n")
        let waited = try await world.w.run(["submit", "--queue", db.url, "--wait", mixed])
        #expect(waited.status == 1, "one of two failed: \(waited.stdout) \(waited.stderr)")
        #expect(waited.stdout.contains("2 jobs: 1 succeeded, 1 notFound."), "\(waited.stdout)")
        let batch = try #require(waited.stdout.split(separator: "\n").first { $0.hasPrefix("batch ") }?.split(separator: " ")[1].dropLast())
        let counted = try JSONParser.parse(try await world.w.run(["status", "--queue", db.url, "--batch", String(batch), "--json"]).stdout)
        #expect(counted["total"]?.intValue == 2 && counted["over"] == .bool(true), "\(counted)")
        #expect(counted["ended"]?["succeeded"]?.intValue == 1 && counted["ended"]?["notFound"]?.intValue == 1, "\(counted)")
        // The fleet's status lists the batches, each counted apart.
        let listed = try await Self.status(world, db)["batches"]?.arrayValue ?? []
        #expect(listed.first?["id"]?.stringValue == String(batch) && listed.first?["total"]?.intValue == 2, "\(listed)")
        #expect(listed.first?["ended"]?["notFound"]?.intValue == 1, "\(listed)")
        let text = try await world.w.run(["status", "--queue", db.url])
        #expect(text.stdout.contains("  \(batch)  2/2 ended (1 notFound, 1 succeeded)"), "\(text.stdout)")
        let allowed = try await world.w.run(["submit", "--queue", db.url, "--wait", "--max-failed", "50%", mixed])
        #expect(allowed.status == 0, "\(allowed.stdout)")
        let gone = world.w.write("gone.jsonl", entry("q:gone2", "?status=404") + "\n")
        #expect(try await world.w.run(["submit", "--queue", db.url, "--wait", gone]).status == 4, "nothing succeeded")
        #expect(try await world.w.run(["status", "--queue", db.url, "--batch", "no-such-batch"]).status == 1)

        // Unique: while the slow job of a key runs, the same key is left out, said, exit 0.
        let slow = world.w.write("slow.jsonl", entry("q:slow", "?delay=6000") + "\n")
        #expect(try await world.w.run(["submit", "--queue", db.url, "--unique", slow]).status == 0)
        let running = try await Self.status(world, db, upTo: .seconds(10)) { $0["running"]?.arrayValue?.first?["key"]?.stringValue == "q:slow" }
        #expect(running["running"]?.arrayValue?.first?["key"]?.stringValue == "q:slow", "\(running)")
        let again = try await world.w.run(["submit", "--queue", db.url, "--unique", slow])
        #expect(again.status == 0)
        #expect(again.stdout.contains("left out 1 unique job whose key is queued or running already: q:slow"), "\(again.stdout)")
        let marked = world.w.write("marked.jsonl", entry("q:slow").dropLast() + #", "unique": true}"# + "\n" + entry("q:other") + "\n")
        let partly = try await world.w.run(["submit", "--queue", db.url, "--wait", marked])
        #expect(partly.stdout.contains("queued \(marked) in ") && partly.stdout.contains("(1 job, 1 left out)"), "\(partly.stdout)")
        #expect(partly.stdout.contains("left out 1 unique job"), "\(partly.stdout)")
        #expect(partly.stdout.contains("batch ") && partly.stdout.contains(": 1 job ("), "\(partly.stdout)")
        // --wait waited for the slow job that holds the key it left out, and counts it.
        #expect(partly.stdout.contains("2 jobs: 2 succeeded."), "the other one and the slow one: \(partly.stdout)")
        #expect(try await db.psql("SELECT state FROM runner.jobs WHERE key = 'q:slow' ORDER BY id DESC LIMIT 1").trimmingCharacters(in: .whitespacesAndNewlines) == "done")
        #expect(partly.status == 0)
        #expect(try await world.w.run(["submit", "--wait", slow]).status == 2, "--wait needs a queue")
        #expect(await Self.stop(watcher, world) == 0)
    }

    /// One batch judged by `run` and by `submit --wait`: the same summary line and exit code,
    /// children counted as children (a missing image is an answer, a broken one a failure),
    /// `--max-failed` counting the same failures; the failed top-level jobs named.
    @Test func submitWaitJudgesABatchAsRunDoes() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let watcher = try Self.startWatcher(world, db, "out")
        defer { if watcher.isRunning { watcher.terminate() } }
        #expect(await world.wait(upTo: .seconds(10)) { world.log("out").contains("watching the queue") })
        let base = world.base
        let list = #"[{"id": 1, "imageUrl": "\#(base)/images/png.png"}, {"id": 2, "imageUrl": "\#(base)/images/missing.png"}, "#
            + #"{"id": 3, "imageUrl": "\#(base)/say?text=not-an-image"}]"#
        let listURL = "\(base)/say?text=" + list.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        func entry(_ key: String, _ query: String = "") -> String {
            #"{"kind": "entry", "key": "\#(key)", "id": "imgly.A.1", "url": "\#(base)/entries/{id}.json\#(query)", "timeout": 10}"#
        }
        let catalog = #"{"kind": "image-list", "key": "j:catalog", "url": "\#(listURL)", "timeout": 10}"#
        let mixed = world.w.write("night.jsonl", [catalog, entry("j:good"), entry("j:gone", "?status=404")].joined(separator: "\n") + "\n")
        let onlyList = world.w.write("list.jsonl", catalog + "\n")

        func countsLine(_ output: String) -> String? {
            output.split(separator: "\n").first { $0.contains(" jobs: ") }.map { String($0.prefix { $0 != "." }) }
        }
        for (file, extra) in [(mixed, [String]()), (mixed, ["--max-failed", "2"]), (mixed, ["--max-failed", "1"]), (onlyList, [])] {
            let ran = try await world.w.run(["run", file, "--out", "\(world.w.root)/run-out"] + extra)
            let waited = try await world.w.run(["submit", "--queue", db.url, "--wait", file] + extra)
            #expect(countsLine(ran.stdout) != nil && countsLine(ran.stdout) == countsLine(waited.stdout), "\(extra)\n\(ran.stdout)\n\(waited.stdout)")
            #expect(ran.status == waited.status, "\(extra): run \(ran.status), submit --wait \(waited.status)\n\(waited.stdout)")
        }
        let run = try await world.w.run(["run", mixed, "--out", "\(world.w.root)/fresh-out"])
        #expect(countsLine(run.stdout) == "6 jobs: 3 succeeded, 2 notFound, 1 failed", "\(run.stdout)")
        #expect(run.status == 1)
        #expect(try await world.w.run(["run", mixed, "--out", "\(world.w.root)/fresh-out", "--max-failed", "2"]).status == 0)
        // The failed top-level job is named, with its status and why.
        let waited = try await world.w.run(["submit", "--queue", db.url, "--wait", mixed])
        #expect(waited.stdout.split(separator: "\n").contains { $0.hasPrefix("notFound") && $0.contains("j:gone") }, "\(waited.stdout)")
        #expect(!waited.stdout.contains("j:good"), "\(waited.stdout)")
        let batch = try #require(waited.stdout.split(separator: "\n").first { $0.hasPrefix("batch ") }?.split(separator: " ")[1].dropLast())
        let listed = try JSONParser.parse(try await world.w.run(["status", "--queue", db.url, "--batch", String(batch), "--json"]).stdout)
        let failed = listed["failed"]?.arrayValue ?? []
        #expect(failed.count == 1 && failed.first?["key"] == .string("j:gone") && failed.first?["status"] == .string("notFound"), "\(listed)")
        #expect(await Self.stop(watcher, world) == 0)
    }

    /// A queue made by a runner before batches and the watchers' list gains them, and its
    /// jobs stay.
    @Test func aQueueOfAnEarlierRunnerGainsBatchesAndTheWatchersList() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let first = world.w.write("first.jsonl", Self.jobs(world, 2, prefix: "q:old", delay: 0))
        #expect(try await world.w.run(["submit", "--queue", db.url, first]).status == 0)
        _ = try await db.psql("DROP TABLE runner.watchers; DROP INDEX runner.jobs_batch; ALTER TABLE runner.jobs DROP COLUMN batch")
        let second = world.w.write("second.jsonl", Self.jobs(world, 1, prefix: "q:new", delay: 0))
        let submitted = try await world.w.run(["submit", "--queue", db.url, second])
        #expect(submitted.status == 0, "\(submitted.stderr)")
        let columns = try await db.psql("SELECT count(*) FROM pg_attribute WHERE attrelid = 'runner.jobs'::regclass AND attname = 'batch'")
        #expect(columns.trimmingCharacters(in: .whitespacesAndNewlines) == "1")
        let status = try await Self.status(world, db)
        #expect(Self.count(status, "queued") == 3 && status["watchers"]?.arrayValue?.isEmpty == true, "\(status)")
    }

    @Test func anIdleWatcherIsWokenByANotifyNotByItsRescan() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let watcher = try Self.startWatcher(world, db, "out")  // --rescan 30: only NOTIFY wakes it in time
        defer { if watcher.isRunning { watcher.terminate() } }
        #expect(await world.wait(upTo: .seconds(10)) { world.log("out").contains("watching the queue") })
        try await Task.sleep(for: .seconds(1))
        let file = world.w.write("one.jsonl", Self.jobs(world, 1, prefix: "q:idle", delay: 0))
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        let submitted = ContinuousClock.now
        #expect(await world.wait(upTo: .seconds(15)) { !world.w.server.arrivals(pathPrefix: "/entries/").isEmpty })
        let arrival = try #require(world.w.server.arrivals(pathPrefix: "/entries/").first)
        #expect(submitted.duration(to: arrival) < .seconds(15), "woken by NOTIFY, not the 30 s rescan: \(submitted.duration(to: arrival))")
        #expect(await Self.stop(watcher, world) == 0)
    }

    /// SIGTERM of a watcher (a restart, a deploy) is not the end of the download it runs: after
    /// its grace the job goes back to the queue with its partial kept, another watcher resumes
    /// it, and no row ends `cancelled`.
    @Test func sigtermHandsARunningDownloadBackAndAnotherWatcherResumesIt() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        RangeResumeTests.writeKind(world.w)
        let kinds = ["--kinds", "\(world.w.root)/k"]
        let first = try Self.startWatcher(world, db, "first", ["--grace", "1", "--limit-rate", "300K"] + kinds)
        defer { if first.isRunning { first.terminate() } }
        let file = world.w.write(
            "big.jsonl", #"{"kind": "file", "name": "big", "url": "\#(world.base)/ranged/\#(RangeResumeTests.size)", "timeout": 60}"# + "\n")
        #expect(try await world.w.run(["submit", "--queue", db.url, file] + kinds).status == 0)
        func partialBytes() -> Int {
            let folder = "\(world.w.root)/out/files"
            let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
            return names.filter { $0.hasPrefix(PartialDownload.prefix) && !$0.hasSuffix(".json") }
                .compactMap { (try? FileManager.default.attributesOfItem(atPath: "\(folder)/\($0)"))?[.size] as? Int }.max() ?? 0
        }
        #expect(await world.wait(upTo: .seconds(30)) { partialBytes() > 1_300_000 }, "\(world.log("first"))")
        kill(first.processIdentifier, SIGTERM)
        #expect(await world.exit(of: first, upTo: .seconds(20)) == 0)
        let state = try await db.psql("SELECT state || ' ' || coalesce(status, '-') FROM runner.jobs")
        #expect(state.trimmingCharacters(in: .whitespacesAndNewlines) == "queued -", "handed back, not ended: \(state)")
        #expect(partialBytes() > 1_000_000, "its partial is kept")

        let second = try Self.startWatcher(world, db, "second", kinds)
        defer { if second.isRunning { second.terminate() } }
        #expect(await world.wait(upTo: .seconds(30)) { Self.records(world)["file:big"] == "succeeded" }, "\(world.log("second"))")
        let record = try JSONParser.parse(Array(try #require(FileManager.default.contents(
            atPath: "\(world.w.root)/out/results/\(OutputStore.fileName(forKey: "file:big")).json"))))
        #expect((record["resumedFrom"]?.intValue ?? 0) > 1_000_000, "the second watcher resumed: \(record)")
        #expect(record["sha256"]?.stringValue == SHA256.hex(RangeResumeTests.file()), "\(record)")
        let rows = try await db.psql("SELECT count(*) FROM runner.jobs WHERE status = 'cancelled'")
        #expect(rows.trimmingCharacters(in: .whitespacesAndNewlines) == "0")
        #expect(await Self.stop(second, world) == 0)
    }

    /// `runner grant --producer ROLE`: the role submits, waits for its batch and reads the
    /// status; it cannot end, change or delete a job, nor insert one with an end of its own.
    @Test func aProducerRoleSubmitsAndFollowsButCannotEndAJob() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let watcher = try Self.startWatcher(world, db, "out")
        defer { if watcher.isRunning { watcher.terminate() } }
        #expect(await world.wait(upTo: .seconds(10)) { world.log("out").contains("watching the queue") })
        _ = try await db.psql("CREATE ROLE producer LOGIN PASSWORD 'producer-pw-1'")
        let granted = try await world.w.run(["grant", "--queue", db.url, "--producer", "producer"])
        #expect(granted.status == 0 && granted.stdout.contains("producer may now submit"), "\(granted.stdout)\(granted.stderr)")
        let nobody = try await world.w.run(["grant", "--queue", db.url, "--producer", "nobody"])
        #expect(nobody.status == 2 && nobody.stderr.contains("there is no role nobody"), "\(nobody.stderr)")

        let producer = "postgresql://producer:producer-pw-1@/postgres?host=\(db.folder)"
        let file = world.w.write("one.jsonl", #"{"kind": "entry", "key": "p:one", "id": "imgly.A.1", "url": "\#(world.base)/entries/{id}.json"}"# + "\n")
        let waited = try await world.w.run(["submit", "--queue", producer, "--wait", "--unique", file])
        #expect(waited.status == 0 && waited.stdout.contains("1 job: 1 succeeded."), "\(waited.stdout)\(waited.stderr)")
        let status = try await world.w.run(["status", "--queue", producer, "--json"])
        #expect(status.status == 0 && status.stdout.contains("\"watchers\""), "\(status.stderr)")

        func asProducer(_ statement: String) async throws -> (status: Int32, output: String) {
            try await ChildProcess.run(
                "\(PostgresServer.bin!)/psql", ["-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-h", db.folder, "-U", "producer", "-d", "postgres", "-c", statement],
                environment: ChildProcess.environment(adding: ["PGPASSWORD": "producer-pw-1"]))
        }
        for statement in [
            "UPDATE runner.jobs SET status = 'succeeded', state = 'done'",
            "DELETE FROM runner.jobs",
            "INSERT INTO runner.jobs (key, kind, job, file, state, status, record, lease_until) VALUES ('p:forged', 'entry', '{}', 'x', 'running', 'succeeded', '{}', now())",
            "INSERT INTO runner.jobs (key, kind, job, file, parent_id) VALUES ('p:child', 'entry', '{}', 'x', 1)",
            "INSERT INTO runner.results (key, record) VALUES ('p:one', '{}')",
            "UPDATE runner.hosts SET paused_until = 'infinity'",
        ] {
            let result = try await asProducer(statement)
            #expect(result.status != 0 && result.output.contains("permission denied"), "\(statement): \(result.output)")
        }
        let rows = try await db.psql("SELECT count(*) FROM runner.jobs WHERE key LIKE 'p:%'")
        #expect(rows.trimmingCharacters(in: .whitespacesAndNewlines) == "1")
        #expect(await Self.stop(watcher, world) == 0)
    }

    /// A row left in the queue as "ended, hooks pending" (as one a watcher dies with) whose record
    /// names an output outside the output folder: the hook runs without a path, and says why.
    @Test func aHookOfARecordLeftInTheQueueGetsAPathOnlyInsideTheOutput() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let first = try Self.startWatcher(world, db, "first")
        #expect(await world.wait(upTo: .seconds(10)) { world.log("first").contains("watching the queue") })
        #expect(await Self.stop(first, world) == 0)
        let logs = (try? FileManager.default.contentsOfDirectory(atPath: "\(world.w.root)/out/runs")) ?? []
        #expect(logs.isEmpty, "a watcher that ended no job leaves no run log: \(logs)")
        let record = #"{"key":"h:forged","kind":"entry","status":"succeeded","output":"../elsewhere/secret.txt","attempts":1,"#
            + #""startedAt":"2026-11-27T10:00:00.000Z","finishedAt":"2026-11-27T10:00:00.010Z"}"#
        _ = try await db.psql(
            "INSERT INTO runner.jobs (key, kind, job, file, state, status, record, claims, runner, lease_until, started_at) "
                + "VALUES ('h:forged', 'entry', '{}', 'x.jsonl', 'running', 'succeeded', '\(record)', 1, 'gone-1', now() - interval '1 minute', now())")
        let events = "\(world.w.root)/events.jsonl"
        let hooked = try Self.startWatcher(
            world, db, "hooked", ["--on-finish", #"printf '%s|%s\n' "$RUNNER_KEY" "$RUNNER_OUTPUT" >> "# + "\(world.w.root)/hook.log", "--events", events])
        defer { if hooked.isRunning { hooked.terminate() } }
        let log = "\(world.w.root)/hook.log"
        #expect(await world.wait(upTo: .seconds(20)) { FileManager.default.fileExists(atPath: log) }, "\(world.log("hooked"))")
        #expect(try String(contentsOfFile: log, encoding: .utf8) == "h:forged|\n", "no path outside the output")
        #expect(world.log("hooked").contains("gets no RUNNER_OUTPUT"), "\(world.log("hooked"))")
        #expect(await world.wait(upTo: .seconds(5)) { ((try? String(contentsOfFile: events, encoding: .utf8)) ?? "").contains(#""notice":"#) })
        #expect(await Self.stop(hooked, world) == 0)
    }

    @Test func aJobAbandonedThreeTimesEndsFailed() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let file = world.w.write("crash.jsonl", Self.jobs(world, 1, prefix: "q:crash", delay: 30_000))
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        for round in 1...3 {
            let watcher = try Self.startWatcher(world, db, "out\(round)", lease: 1)
            defer { if watcher.isRunning { watcher.terminate() } }
            #expect(await world.wait(upTo: .seconds(20)) { world.w.server.arrivals(pathPrefix: "/entries/").count == round }, "round \(round)")
            kill(watcher.processIdentifier, SIGKILL)
            _ = await world.exit(of: watcher, upTo: .seconds(5))
        }
        let last = try Self.startWatcher(world, db, "last", lease: 1)
        defer { if last.isRunning { last.terminate() } }
        let status = try await Self.status(world, db, upTo: .seconds(10)) { Self.count($0, "failed") == 1 }
        #expect(status["failed"]?["count"]?.intValue == 1, "\(status)")
        #expect(status["failed"]?["latest"]?["reason"]?.stringValue == "abandoned by 3 runners", "\(status)")
        #expect(world.w.server.arrivals(pathPrefix: "/entries/").count == 3, "not run a fourth time")
        #expect(await Self.stop(last, world) == 0)
    }

    @Test func finishedJobsOlderThanKeepArePruned() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let file = world.w.write("kept.jsonl", Self.jobs(world, 3, prefix: "q:kept", delay: 0))
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        let watcher = try Self.startWatcher(world, db, "out")
        defer { if watcher.isRunning { watcher.terminate() } }
        #expect(await world.wait(upTo: .seconds(20)) { Self.records(world).count == 3 })
        #expect(await Self.stop(watcher, world) == 0)
        #expect(try await Self.status(world, db)["done"]?["count"]?.intValue == 3, "kept for 7 days by default")
        let pruning = try Self.startWatcher(world, db, "again", ["--keep", "0"])
        defer { if pruning.isRunning { pruning.terminate() } }
        #expect(await world.wait(upTo: .seconds(10)) { world.log("again").contains("3 finished jobs older than --keep removed") }, "\(world.log("again"))")
        #expect(try await Self.status(world, db)["done"]?["count"]?.intValue == 0)
        #expect(await Self.stop(pruning, world) == 0)
    }

    @Test(.enabled(if: Trace.strace != nil, "strace is not installed"))
    func aRecordIsStoredInTheQueueOnlyOnceItIsDurableOnDisk() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let tracePath = "\(world.w.root)/watch.trace"
        let log = "\(world.w.root)/watch.stderr"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let strace = try ChildProcess(
            Trace.strace!,
            [
                "-f", "-s", "512", "-o", tracePath, "-e", "trace=renameat,renameat2,rename,syncfs,sendto",
                RunnerBinary.path, "watch", "--queue", db.url, "--out", world.w.out, "--rescan", "30",
            ],
            stdout: .null, stderr: .file(log))
        defer { if strace.isRunning { strace.terminate() } }
        #expect(await world.wait(upTo: .seconds(20)) { world.text(log).contains("watching the queue") })
        // "watching the queue … as HOST-PID;": the watcher's pid, to stop it.
        let name = try #require(world.text(log).split(separator: " as ").last?.split(separator: ";").first)
        let pid = try #require(name.split(separator: "-").last.flatMap { Int32($0) })
        let file = world.w.write("one.jsonl", Self.jobs(world, 1, prefix: "q:durable", delay: 0))
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        let status = try await Self.status(world, db, upTo: .seconds(10)) { Self.count($0, "done") == 1 }
        #expect(status["done"]?["count"]?.intValue == 1, "\(status)")
        kill(pid, SIGTERM)
        #expect(await world.exit(of: strace, upTo: .seconds(20)) == 0)

        let calls = Trace.parse(world.text(tracePath))
        let record = try #require(calls.lastIndex { $0.name.hasPrefix("rename") && $0.text.contains(OutputStore.fileName(forKey: "q:durable0")) })
        let stored = try #require(calls.firstIndex { $0.name == "sendto" && $0.text.contains("UPDATE runner.jobs j SET status = f.status") })
        let syncfs = try #require(calls[record...].firstIndex { $0.name == "syncfs" }, "a syncfs after the record is written")
        #expect(record < syncfs && syncfs < stored, "the record is written, made durable, and only then stored in the queue")
    }

    @Test func theLivePageAndAPIOfAQueueWatcherShowTheFleetAndFeedTheQueue() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let watcher = try Self.startWatcher(world, db, "out", ["--listen", "127.0.0.1:0", "--listen-token", LiveTests.tokenFile(world)])
        defer { if watcher.isRunning { watcher.terminate() } }
        var port: UInt16?
        _ = await world.wait(upTo: .seconds(20)) {
            port = world.log("out").split(separator: "\n").lazy.compactMap { line -> UInt16? in
                guard let range = line.range(of: "live page and API at http://127.0.0.1:") else { return nil }
                return UInt16(line[range.upperBound...].prefix { $0.isNumber })
            }.first
            return port != nil
        }
        let live = try #require(port, "\(world.log("out"))")
        let auth = LiveTests.auth

        // A job posted over HTTP is validated, queued in the database, claimed and run.
        let bad = #"{"kind": "entry", "key": "q:bad", "url": "http://x.test/{id}"}"#
        #expect(try await RawHTTP.exchange(port: live, "POST /api/jobs HTTP/1.1", body: Array(bad.utf8), headers: auth).status == 400)
        let slow = Self.jobs(world, 1, prefix: "q:live", delay: 2000)
        let posted = try await RawHTTP.exchange(port: live, "POST /api/jobs?name=live.jsonl HTTP/1.1", body: Array(slow.utf8), headers: auth)
        #expect(posted.status == 202, "\(posted.body)")
        var running: JSONValue = .null
        _ = await world.wait(upTo: .seconds(10)) {
            guard let status = try? LiveTests.json(await RawHTTP.exchange(port: live, "GET /api/status HTTP/1.1", headers: auth)) else { return false }
            running = status["running"]?.arrayValue?.first { $0["key"]?.stringValue == "q:live0" } ?? .null
            return running["phase"] != nil
        }
        #expect(running["runner"]?.stringValue?.isEmpty == false, "the queue's view, merged with this watcher's: \(running)")
        #expect(running["phase"]?.stringValue != nil, "\(running)")
        let page = try await RawHTTP.exchange(port: live, "GET / HTTP/1.1", headers: auth)
        let html = page.body
        #expect(page.status == 200 && html.contains("jobs queued") && html.contains("q:live0"), "\(html)")
        #expect(await world.wait(upTo: .seconds(20)) { Self.records(world)["q:live0"] == "succeeded" })
        let stored = try await Self.status(world, db, upTo: .seconds(5)) { Self.count($0, "done") == 1 }
        #expect(Self.count(stored, "done") == 1, "stored in the queue once durable on disk")

        // Cancel over HTTP reaches the queue.
        let other = Self.jobs(world, 1, prefix: "q:gone", delay: 20_000)
        #expect(try await RawHTTP.exchange(port: live, "POST /api/jobs HTTP/1.1", body: Array(other.utf8), headers: auth).status == 202)
        #expect(await world.wait(upTo: .seconds(10)) { world.w.server.arrivals(pathPrefix: "/entries/").count == 2 })
        #expect(try await RawHTTP.exchange(port: live, "DELETE /api/jobs/q:gone0 HTTP/1.1", headers: auth).status == 202)
        #expect(await world.wait(upTo: .seconds(10)) { Self.records(world)["q:gone0"] == "cancelled" })
        #expect(try await RawHTTP.exchange(port: live, "DELETE /api/jobs/q:nothing HTTP/1.1", headers: auth).status == 404)

        // A job another watcher runs (of a kind only it has) is a row of the page's fleet table,
        // and its end is in this watcher's event stream.
        let reader = try RawHTTP.connect(port: live, timeout: .seconds(30))
        defer { close(reader) }
        RawHTTP.send(reader, "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(LiveTests.token)\r\n\r\n")
        var stream: [UInt8] = []
        #expect(await RawHTTP.read(reader, until: "retry: 2000", into: &stream))
        let kinds = "\(FileKindTests.jobs)/kinds"
        let declaring = try Self.startWatcher(world, db, "declaring", ["--kinds", kinds])
        defer { if declaring.isRunning { declaring.terminate() } }
        let declared = world.w.write(
            "declared.jsonl",
            #"{"kind": "json-entry", "key": "q:elsewhere", "id": "imgly.A.1", "url": "\#(world.base)/entries/{id}.json?delay=3000", "timeout": 20}"# + "\n")
        #expect(try await world.w.run(["submit", "--queue", db.url, "--kinds", kinds, declared]).status == 0)
        var fleetPage = ""
        _ = await world.wait(upTo: .seconds(15)) {
            fleetPage = (try? await RawHTTP.exchange(port: live, "GET /?part=main HTTP/1.1", headers: auth).body) ?? ""
            return fleetPage.contains("<td>q:elsewhere</td>")
        }
        #expect(fleetPage.contains("Running elsewhere in the fleet") && fleetPage.contains("<td>q:elsewhere</td>"), "\(fleetPage)")
        #expect(fleetPage.contains("<span>watchers</span>"), "\(fleetPage)")
        #expect(await RawHTTP.read(reader, until: #""key":"q:elsewhere","kind":"json-entry","status":"succeeded","runner":""#, into: &stream),
            "\(String(decoding: stream, as: UTF8.self).suffix(600))")
        #expect(await Self.stop(declaring, world) == 0)
        #expect(await Self.stop(watcher, world) == 0)
    }

    /// A list's children are queue jobs: both watchers run them, `status` shows the parent's
    /// progress, a watcher killed among them loses nothing and no ended child runs again, and
    /// the parent's record is completed with their counts in the shared output.
    @Test func aListsChildrenRunOnEveryWatcherAndAKilledOneLosesNone() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let first = try Self.startWatcher(world, db, "first", lease: 2, ["--concurrency", "2"])
        defer { if first.isRunning { first.terminate() } }
        let second = try Self.startWatcher(world, db, "second", lease: 2, ["--concurrency", "2"])
        defer { if second.isRunning { second.terminate() } }
        #expect(await world.wait(upTo: .seconds(20)) { ["first", "second"].allSatisfy { world.log($0).contains("watching the queue") } })
        let file = world.w.write(
            "catalog.jsonl", #"{"kind": "image-list", "key": "q:catalog", "url": "\#(world.base)/list/16?image=delay%3D300", "timeout": 20}"# + "\n")
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)

        // Some children ended: the parent waits, and says how far it got.
        let progress = try await Self.status(world, db, upTo: .seconds(30)) { Self.count($0, "done") >= 4 }
        let parents = progress["waiting"]?["parents"]?.arrayValue ?? []
        #expect(parents.first?["key"] == .string("q:catalog") && parents.first?["total"] == JSONValue(16), "\(progress)")
        let text = try await world.w.run(["status", "--queue", db.url])
        #expect(text.stdout.contains("waiting:  1 parent for its children") && text.stdout.contains("/16 children ended"), "\(text.stdout)")
        kill(first.processIdentifier, SIGKILL)
        _ = await world.exit(of: first, upTo: .seconds(5))

        let done = try await Self.status(world, db, upTo: .seconds(60)) { Self.count($0, "done") == 17 }
        #expect(Self.count(done, "done") == 17 && done["waiting"]?["count"] == JSONValue(0), "\(done)")
        let record = try JSONParser.parse(Array(try #require(FileManager.default.contents(
            atPath: "\(world.w.root)/out/results/\(OutputStore.fileName(forKey: "q:catalog")).json"))))
        #expect(record["details"]?["children"]?["succeeded"] == JSONValue(16), "\(record)")
        // The run logs end the parent with the same counts.
        let runs = "\(world.w.root)/out/runs"
        let lines = ((try? FileManager.default.contentsOfDirectory(atPath: runs)) ?? []).flatMap { name in
            ((try? String(contentsOfFile: "\(runs)/\(name)", encoding: .utf8)) ?? "").split(separator: "\n")
        }.compactMap { try? JSONParser.parse(Array($0.utf8)) }.filter { $0["key"] == .string("q:catalog") }
        #expect(lines.contains { $0["details"]?["children"]?["succeeded"] == JSONValue(16) }, "\(lines)")
        // Each child fetched once, but those that ran on the killed watcher (two slots).
        let fetched = world.w.server.arrivals(pathPrefix: "/images/").count
        #expect((16...18).contains(fetched), "only the killed watcher's running children ran again: \(fetched) fetches")
        let ranBy = try await Self.ranBy(db)
        #expect(Self.name(first, in: ranBy).map { ranBy[$0] ?? 0 } ?? 0 > 0, "the killed watcher had ended some: \(ranBy)")
        #expect(await Self.stop(second, world) == 0)
    }

    /// `cancel PARENT` cancels its queued children and stops its running one; the parent
    /// completes with them counted.
    @Test func cancellingAParentCancelsItsChildren() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let watcher = try Self.startWatcher(world, db, "out", ["--concurrency", "1"])
        defer { if watcher.isRunning { watcher.terminate() } }
        let file = world.w.write(
            "catalog.jsonl", #"{"kind": "image-list", "key": "q:parent", "url": "\#(world.base)/list/5?image=delay%3D20000", "timeout": 30}"# + "\n")
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        #expect(await world.wait(upTo: .seconds(20)) { world.w.server.arrivals(pathPrefix: "/images/").count == 1 }, "a child runs")
        let cancel = try await world.w.run(["cancel", "q:parent", "--queue", db.url])
        // The watcher claimed one more child ahead (--concurrency 1): that one is asked to stop too.
        #expect(cancel.status == 0 && cancel.stdout.contains(" queued jobs cancelled"), "\(cancel.stdout)\(cancel.stderr)")
        let done = try await Self.status(world, db, upTo: .seconds(20)) { $0["waiting"]?["count"] == JSONValue(0) && $0["running"]?.arrayValue?.isEmpty == true }
        #expect(done["waiting"]?["count"] == JSONValue(0), "\(done)")
        let record = try JSONParser.parse(Array(try #require(FileManager.default.contents(
            atPath: "\(world.w.root)/out/results/\(OutputStore.fileName(forKey: "q:parent")).json"))))
        #expect(record["details"]?["children"]?["cancelled"] == JSONValue(5), "the running one stopped, the queued ones never ran: \(record)")
        #expect(world.w.server.arrivals(pathPrefix: "/images/").count == 1)
        #expect(await Self.stop(watcher, world) == 0)
    }

    /// Hooks are part of the job: it is done only once they ended; a watcher killed while they
    /// ran takes them with it, and another runs them with the job's own status, without
    /// running the job again.
    @Test func aWatcherKilledInAHookLeavesItToAnotherWithTheJobsOwnStatus() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let root = world.w.root
        let first = try Self.startWatcher(world, db, "first", lease: 2, ["--on-finish", #"echo $$ > "\#(root)/hook.pid"; exec sleep 300"#])
        defer { if first.isRunning { first.terminate() } }
        let file = world.w.write("hooked.jsonl", Self.jobs(world, 1, prefix: "q:hooked", delay: 0))
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        let pidFile = "\(root)/hook.pid"
        #expect(await world.wait(upTo: .seconds(20)) { FileManager.default.fileExists(atPath: pidFile) }, "\(world.log("first"))")
        let running = try await Self.status(world, db)
        #expect(Self.count(running, "done") == 0 && running["running"]?.arrayValue?.count == 1, "not done while its hook runs: \(running)")

        kill(first.processIdentifier, SIGKILL)
        _ = await world.exit(of: first, upTo: .seconds(5))
        let pid = try #require(pid_t((try? String(contentsOfFile: pidFile, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""))
        let died = await world.wait(upTo: .seconds(5)) { !ExecutableKindTests.alive(pid) }
        #expect(died, "the hook died with its watcher")
        if !died { kill(pid, SIGKILL) }

        let second = try Self.startWatcher(world, db, "second", lease: 2, ["--on-finish", #"echo "$RUNNER_KEY $RUNNER_STATUS" >> "\#(root)/ran.log""#])
        defer { if second.isRunning { second.terminate() } }
        let ran = await world.wait(upTo: .seconds(30)) { (try? String(contentsOfFile: "\(root)/ran.log", encoding: .utf8)) == "q:hooked0 succeeded\n" }
        #expect(ran, "\((try? String(contentsOfFile: "\(root)/ran.log", encoding: .utf8)) ?? "") \(world.log("second"))")
        let status = try await Self.status(world, db, upTo: .seconds(10)) { Self.count($0, "done") == 1 }
        #expect(Self.count(status, "done") == 1, "\(status)")
        #expect(world.w.server.arrivals(pathPrefix: "/entries/").count == 1, "the job ran once")
        #expect(world.log("second").contains("q:hooked0: its --on-finish hooks, left by a runner that stopped, run here"), "\(world.log("second"))")
        // The claim for its hooks was no abandon of the job, and kept the job's own times.
        let row = try await db.psql("SELECT claims || ' ' || hook_claims || ' ' || (finished_at >= started_at) FROM runner.jobs WHERE key = 'q:hooked0'")
        #expect(row.trimmingCharacters(in: .whitespacesAndNewlines) == "1 1 true", "claims, hook claims, finished after it started: \(row)")
        #expect(await Self.stop(second, world) == 0)
    }

    /// A large file whose watchers are killed three times, each after its partial grew and was
    /// synced, is not "abandoned by 3 runners": each of those claims made durable progress, and
    /// the fourth watcher finishes it.
    @Test func aDownloadThatProgressesAcrossThreeKillsIsNotAbandoned() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        RangeResumeTests.writeKind(world.w)
        let kinds = ["--kinds", "\(world.w.root)/k"]
        let size = 60_000_000
        let file = world.w.write(
            "big.jsonl", #"{"kind": "file", "name": "huge", "url": "\#(world.base)/ranged/\#(size)", "timeout": 120}"# + "\n")
        #expect(try await world.w.run(["submit", "--queue", db.url, file] + kinds).status == 0)
        func credits() async -> Int {
            Int(((try? await db.psql("SELECT credits FROM runner.jobs WHERE key = 'file:huge'")) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        }
        for round in 1...3 {
            let watcher = try Self.startWatcher(world, db, "w\(round)", lease: 2, ["--limit-rate", "12M"] + kinds)
            defer { if watcher.isRunning { watcher.terminate() } }
            // Killed once its claim was credited: a checkpoint of its partial was synced.
            let credited = await world.wait(upTo: .seconds(60)) { await credits() >= round }
            let now = await credits()
            #expect(credited, "round \(round): \(now) \(world.log("w\(round)"))")
            kill(watcher.processIdentifier, SIGKILL)
            _ = await world.exit(of: watcher, upTo: .seconds(5))
        }
        let last = try Self.startWatcher(world, db, "w4", lease: 2, kinds)
        defer { if last.isRunning { last.terminate() } }
        #expect(await world.wait(upTo: .seconds(60)) { Self.records(world)["file:huge"] == "succeeded" }, "\(world.log("w4"))")
        // Four claims, the three killed ones credited (the fourth may be too: its checkpoints).
        // The row is ended just after the record is on disk: asked until it is.
        var row = ""
        _ = await world.wait(upTo: .seconds(10)) {
            row = ((try? await db.psql("SELECT status || ' ' || claims || ' ' || (credits >= 3) FROM runner.jobs WHERE key = 'file:huge'")) ?? "")
                .trimmingCharacters(in: .whitespacesAndNewlines)
            return row.hasPrefix("succeeded")
        }
        #expect(row == "succeeded 4 true", "\(row)")
        #expect(await Self.stop(last, world) == 0)
    }

    /// One output for the fleet: the first watcher stamps its folder; a watcher given another
    /// folder refuses to start, naming the queue's, and one given a folder of another queue too.
    @Test func aWatcherWhoseOutIsNotTheQueuesOutputRefusesToStart() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let first = try Self.startWatcher(world, db, "first")
        defer { if first.isRunning { first.terminate() } }
        #expect(await world.wait(upTo: .seconds(20)) { world.log("first").contains("watching the queue") }, "\(world.log("first"))")
        let stamp = try JSONParser.parse(Array(try #require(FileManager.default.contents(atPath: "\(world.w.root)/out/.runner-queue"))))
        #expect(stamp["queue"]?.stringValue?.isEmpty == false, "\(stamp)")

        let elsewhere = try await world.w.run(["watch", "--queue", db.url, "--out", "\(world.w.root)/mine"])
        #expect(elsewhere.status == 2, "\(elsewhere.stderr)")
        #expect(elsewhere.stderr.split(separator: "\n").count == 1, "\(elsewhere.stderr)")
        #expect(elsewhere.stderr.contains("\(world.w.root)/mine") && elsewhere.stderr.contains("its output is \(world.w.root)/out"), "\(elsewhere.stderr)")

        // The same folder under another queue is refused too.
        let other = try await PostgresServer()
        let mixed = try await world.w.run(["watch", "--queue", other.url, "--out", "\(world.w.root)/out"])
        #expect(mixed.status == 2 && mixed.stderr.contains("the output of another queue"), "\(mixed.stderr)")
        #expect(await Self.stop(first, world) == 0)
    }

    @Test func badURLsUnreachableServersAndWrongPasswordsAreOneLine() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let wrong = db.url.replacingOccurrences(of: db.password, with: "not-the-password")
        let refused = try await world.w.run(["status", "--queue", wrong])
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("password authentication failed"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("not-the-password"), "the password is never printed: \(refused.stderr)")
        #expect(refused.stderr.split(separator: "\n").count == 1)

        let malformed = try await world.w.run(["watch", "--queue", "mysql://x", "--out", world.w.out])
        #expect(malformed.status == 2)
        #expect(malformed.stderr.contains("not a PostgreSQL URL"))

        let gone = "postgresql://runner:\(db.password)@/postgres?host=\(world.w.root)"
        let unreachable = try await world.w.run(["watch", "--queue", gone, "--out", world.w.out])
        #expect(unreachable.status == 1, "\(unreachable.stderr)")
        #expect(unreachable.stderr.split(separator: "\n").count == 1, "\(unreachable.stderr)")
        #expect(!unreachable.stderr.contains(db.password))

        // A password with an unencoded @ or / is refused, naming the problem; no part of it shown.
        for password in ["pa@ss-w0rd-part", "pa/ss-w0rd-part", "p@ss/w0rd?part"] {
            let bad = "postgresql://runner:\(password)@/postgres?host=\(db.folder)"
            let result = try await world.w.run(["status", "--queue", bad])
            #expect(result.status == 2, "\(result.stderr)")
            #expect(result.stderr.contains("must be percent-encoded"), "\(result.stderr)")
            #expect(!result.stderr.contains("w0rd") && !result.stderr.contains("part") && !result.stderr.contains("pa@"), "\(result.stderr)")
        }
    }

    /// A password given on the command line is blanked in the process's arguments (`ps`).
    @Test func aPasswordOnTheCommandLineIsHiddenFromPs() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let watcher = try Self.startWatcher(world, db, "out")
        defer { watcher.terminate() }
        #expect(await world.wait(upTo: .seconds(20)) { world.log("out").contains("watching the queue") }, "\(world.log("out"))")
        let arguments = try String(contentsOfFile: "/proc/\(watcher.processIdentifier)/cmdline", encoding: .utf8)
        #expect(!arguments.contains(db.password), "\(arguments)")
        #expect(arguments.contains("postgresql://runner:\(String(repeating: "*", count: db.password.count))@/postgres"), "\(arguments)")
        #expect(await Self.stop(watcher, world) == 0)
    }
}
