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

/// `--queue` through the binary against a real PostgreSQL: submit and its batches, roles,
/// pruning, durable records, the queue's one output folder, and what the command line says of a
/// queue it cannot use. Its helpers serve the other suites of the queue, each of its own so that
/// they run side by side: QueueFleetTests (watchers sharing a queue), QueueNoticeTests (what
/// reaches every watcher), QueueCrashTests and QueueRestartTests (watchers and a database that
/// go away), and QueueLeaseTests (the store's contract on libpq, on the real clock).
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

    /// Jobs over `keys` keys, each key its own entry (so the server's arrivals tell keys apart).
    static let entryIDs = ["imgly.A.1", "imgly.A.2", "imgly.A.3", "imgly.B.1"]

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

        // Tables an older watcher made lack the index of files' open jobs: the producer, which
        // may not make it, submits without it; the next watcher's connection makes it.
        _ = try await db.psql("DROP INDEX runner.jobs_file_open, runner.jobs_file")
        let producer = "postgresql://producer:producer-pw-1@/postgres?host=\(db.folder)"
        let file = world.w.write("one.jsonl", #"{"kind": "entry", "key": "p:one", "id": "imgly.A.1", "url": "\#(world.base)/entries/{id}.json"}"# + "\n")
        let waited = try await world.w.run(["submit", "--queue", producer, "--wait", "--unique", file])
        #expect(waited.status == 0 && waited.stdout.contains("1 job: 1 succeeded."), "\(waited.stdout)\(waited.stderr)")
        let index = "SELECT count(*) FROM pg_indexes WHERE schemaname = 'runner' AND indexname IN ('jobs_file_open', 'jobs_file')"
        #expect(try await db.psql(index).trimmingCharacters(in: .whitespacesAndNewlines) == "0")
        _ = try JobQueue(url: db.url)
        #expect(try await db.psql(index).trimmingCharacters(in: .whitespacesAndNewlines) == "2")
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
