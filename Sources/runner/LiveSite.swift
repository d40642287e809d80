import Foundation
import Glibc
import RunnerKinds
import RunnerKit

/// `runner watch --listen`: the live page and the API, answered from the watcher's `LiveBoard`, its
/// engine and where its jobs come from (the spool folder, or the queue).
///
///     GET    /                the page (a snapshot without scripts; with them it follows the events)
///     GET    /api/status      `runner status --json`, running jobs with their phase, hosts, the last finished
///     GET    /api/events      server-sent events: the lines of --events
///     POST   /api/jobs        a job file's content, validated as `runner submit` does: 202 queued, or 400
///     DELETE /api/jobs/KEY    as `runner cancel KEY`
struct LiveSite: Sendable {
    let board: LiveBoard
    let source: any LiveSource
    let registry: KindRegistry
    /// The engine's hosts now (slots in use, pace).
    let hosts: @Sendable () -> [JobEngine.HostActivity]
    /// This watcher's name in its queue (nil: a spool's watcher), on its running jobs that the
    /// queue's snapshot does not list yet.
    var runner: String? = nil

    /// The paths a browser is sent on to after `/?token=T` (any other: `/`).
    static let pages: Set<String> = ["/", "/api/status"]

    func handle(_ request: LiveServer.Request) -> LiveServer.Reply {
        let path = request.path
        switch (request.method, path) {
        case ("GET", "/"), ("HEAD", "/"):
            let snapshot = board.snapshot
            let overview = source.overview(runningHere: snapshot.running.count)
            let body = request.query == "part=main"
                ? LivePage.main(snapshot, overview: overview, hosts: hosts()) : LivePage.page(snapshot, overview: overview, hosts: hosts())
            return .response(LiveServer.Response(
                status: 200, contentType: "text/html; charset=utf-8", body: Array(body.utf8),
                headers: [("Content-Security-Policy", LivePage.contentSecurityPolicy)]))
        case ("GET", "/api/status"), ("HEAD", "/api/status"):
            // Every string capped: whoever writes a job must not make the answer huge.
            return .response(.json(200, statusJSON().capped()))
        case ("GET", "/api/events"):
            return .events(first: "retry: 2000\n\n")
        // A file checked and queued, a cancel asked for: answered from a task of their own (the
        // files on the blocking work's call lane, a queue's database through its store), while
        // the page serves the others.
        case ("POST", "/api/jobs"):
            return .later { answer in Task { answer(await submit(request)) } }
        case ("DELETE", _) where path.hasPrefix("/api/jobs/"):
            let key = String(path.dropFirst("/api/jobs/".count))
            return .later { answer in Task { answer(await cancel(key: key)) } }
        case (_, "/"), (_, "/api/status"), (_, "/api/events"), (_, "/api/jobs"):
            return .response(.text(405, "\(request.method) is not served at \(path)"))
        default:
            return .response(.text(404, "nothing at \(path); try /, /api/status, /api/events, POST /api/jobs, DELETE /api/jobs/KEY"))
        }
    }

    // MARK: - Status

    func statusJSON() -> JSONValue {
        let now = Date()
        let snapshot = board.snapshot
        var members = source.status()
        // The running keys of every watcher, with the phase of those this watcher runs.
        let mine = Dictionary(snapshot.running.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
        var seen = Set<String>()
        if let index = members.firstIndex(where: { $0.key == "running" }), case .array(let running) = members[index].value {
            let merged: [JSONValue] = running.map { entry in
                guard case .object(var fields) = entry, case .string(let key)? = fields.first(where: { $0.key == "key" })?.value,
                    let job = mine[key]
                else { return entry }
                seen.insert(key)
                let details = Self.details(job, now: now)
                fields.removeAll { field in details.contains { $0.key == field.key } }
                fields += details
                return .object(fields)
            }
            let others: [JSONValue] = snapshot.running.filter { !seen.contains($0.key) }.map { job in
                .object([("key", .string(job.key))] + (runner.map { [("runner", .string($0))] } ?? []) + [
                    ("pid", JSONValue(Int(getpid()))), ("startedAt", .string(Timestamp.iso8601(job.startedAt))),
                    ("ageMs", JSONValue(Self.milliseconds(now.timeIntervalSince(job.startedAt)))),
                ] + Self.details(job, now: now))
            }
            members[index].value = .array(merged + others)
        }
        members.append(("jobs", .object(JobStatus.allCases.map { ($0.rawValue, JSONValue(snapshot.counts[$0] ?? 0)) })))
        let (shown, more) = Self.busiest(hosts())
        members.append(("moreHosts", JSONValue(more)))
        members.append(("hosts", .array(shown.map { host in
            .object([
                ("host", .string(host.host)), ("inUse", JSONValue(host.inUse)), ("limit", JSONValue(host.limit)),
                ("waiting", JSONValue(host.waiting)), ("rate", host.rate.map { JSONValue.number($0) } ?? .null),
                ("pausedMs", JSONValue(host.pausedFor.inMilliseconds)),
            ])
        })))
        members.append(("finished", .array(snapshot.finished.map { job in
            var fields: [(key: String, value: JSONValue)] = [
                ("key", .string(job.key)), ("kind", .string(job.kind)), ("status", .string(job.status.rawValue)),
                ("finishedAt", .string(Timestamp.iso8601(job.finishedAt))), ("durationMs", JSONValue(job.milliseconds)),
            ]
            if let message = job.message { fields.append(("error", .string(message))) }
            return .object(fields)
        })))
        members.append(("throughput", .object([
            ("spanSeconds", JSONValue(snapshot.spanSeconds)), ("finished", .array(snapshot.throughput.map { JSONValue($0) })),
        ])))
        members.append(("since", .string(Timestamp.iso8601(snapshot.since))))
        return .object(members)
    }

    private static func details(_ job: LiveBoard.RunningJob, now: Date) -> [(key: String, value: JSONValue)] {
        var members: [(key: String, value: JSONValue)] = [
            ("kind", .string(job.kind)), ("url", .string(job.url)), ("phase", .string(job.phase)),
            ("phaseMs", JSONValue(milliseconds(now.timeIntervalSince(job.phaseSince)))), ("attempt", JSONValue(job.attempt)),
        ]
        if let bytes = job.bytes {
            members.append(("bytes", JSONValue(bytes)))
            members.append(("total", job.total.map { JSONValue($0) } ?? .null))
            members.append(("bytesPerSecond", job.bytesPerSecond.map { JSONValue(Int($0)) } ?? .null))
        }
        return members
    }

    static func milliseconds(_ seconds: TimeInterval) -> Int { max(0, Int(seconds * 1000)) }

    /// The hosts shown: the busiest `limit` (slots in use and jobs waiting, then a pause), and
    /// how many more there are. A list naming thousands of hosts keeps the page small.
    static func busiest(_ hosts: [JobEngine.HostActivity], limit: Int = 50) -> (shown: [JobEngine.HostActivity], more: Int) {
        guard hosts.count > limit else { return (hosts, 0) }
        let sorted = hosts.sorted { a, b in
            (a.inUse + a.waiting, a.pausedFor, b.host) > (b.inUse + b.waiting, b.pausedFor, a.host)
        }
        return (Array(sorted.prefix(limit)), hosts.count - limit)
    }

    // MARK: - Submitting and cancelling

    /// The body is a job file (JSON or JSON Lines); `?name=NAME` names it (in the spool). It is
    /// held and checked on the blocking work's call lane (a large file is long to read and
    /// check), then queued through the source.
    func submit(_ request: LiveServer.Request) async -> LiveServer.Response {
        let site = self
        switch await BlockingWork.shared.lane(.calls).run({ site.hold(request) }) {
        case .refused(let response):
            return response
        case .held(let folder, let path, let name, let jobs):
            defer { BlockingWork.shared.enqueue(on: .calls) { try? FileManager.default.removeItem(atPath: folder) } }
            do {
                let queued = try await source.queue(file: path, name: name)
                return .json(202, .object([("queued", .string(queued)), ("jobs", JSONValue(jobs))]))
            } catch {
                return .json(500, .object([("error", .string("\(error)"))]))
            }
        }
    }

    /// A posted job file, written to a temporary folder of its own and checked as `submit`
    /// checks one; or the answer that refuses it.
    enum Held: Sendable {
        case held(folder: String, path: String, name: String, jobs: Int)
        case refused(LiveServer.Response)
    }

    /// Writes and checks a posted job file (blocking: file writes and reads).
    func hold(_ request: LiveServer.Request) -> Held {
        let name = Self.fileName(query: request.query)
        let folder = FileManager.default.temporaryDirectory.path + "/runner-api-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        guard mkdir(folder, 0o700) == 0 else { return .refused(.text(500, "cannot make a temporary folder: \(String(cString: strerror(errno)))")) }
        let path = "\(folder)/\(name)"
        func refused(_ response: LiveServer.Response) -> Held {
            try? FileManager.default.removeItem(atPath: folder)
            return .refused(response)
        }
        guard FileManager.default.createFile(atPath: path, contents: Data(request.body)) else {
            return refused(.text(500, "cannot hold the job file in \(folder)"))
        }
        let report = JobFileReader.validate(path: path, registry: registry, limits: .producer, checkingSecrets: false)
        guard report.errors.isEmpty else {
            let errors = report.errors.map { "\($0)".replacingOccurrences(of: path, with: name) }
            return refused(.json(400, .object([("error", .string("nothing was queued")), ("problems", .array(errors.map { .string($0) }))])))
        }
        guard report.jobs > 0 else { return refused(.json(400, .object([("error", .string("the file holds no job; nothing was queued"))]))) }
        return .held(folder: folder, path: path, name: name, jobs: report.jobs)
    }

    /// A safe file name from `name=` in the query, else one made of the time.
    static func fileName(query: String) -> String {
        let given = query.split(separator: "&").first { $0.hasPrefix("name=") }.map { String($0.dropFirst(5)).removingPercentEncoding ?? "" } ?? ""
        let safe = String(given.unicodeScalars.filter { CharacterSet.alphanumerics.contains($0) && $0.isASCII || "._-".unicodeScalars.contains($0) }.prefix(100))
        if !safe.isEmpty, !safe.hasPrefix(".") { return safe }
        return "api-" + Timestamp.iso8601(Date()).filter { $0.isNumber } + ".json"
    }

    func cancel(key: String) async -> LiveServer.Response {
        guard !key.isEmpty else { return .text(400, "the key is empty") }
        return await source.cancel(key: key)
    }
}

extension LiveSite {
    /// The server of `--listen` over `source`, and the observers that feed its board and its
    /// event readers (to add to the engine's).
    static func make(
        _ settings: LiveOptions.Settings, source: any LiveSource, registry: KindRegistry,
        hosts: @escaping @Sendable () -> [JobEngine.HostActivity], runner: String? = nil
    ) -> (server: LiveServer, observers: [any RunObserver]) {
        let board = LiveBoard()
        let site = LiveSite(board: board, source: source, registry: registry, hosts: hosts, runner: runner)
        let server = LiveServer(host: settings.host, port: settings.port, token: settings.token, pages: LiveSite.pages) { site.handle($0) }
        return (server, [board, EventLines(sink: server, runner: runner)])
    }

    /// Starts `server` and says where it listens; false, said in one line, when it cannot.
    static func start(_ server: LiveServer, _ settings: LiveOptions.Settings) -> Bool {
        do {
            try server.start()
        } catch {
            Console.error("--listen: \(error)")
            return false
        }
        Console.err("runner: live page and API at http://\(LiveServer.display(host: settings.host, port: server.port))/")
        return true
    }
}

/// Where a watcher's jobs come from, as its page and API show and feed it.
/// What the page shows of the whole feed, beside this watcher's own jobs.
struct LiveOverview {
    /// The feed's counts, label by label.
    var counts: [(String, Int)]
    /// Jobs the other watchers of a queue run now: key, watcher, since when, and past its run
    /// (`hooks`, `completing`) the phase.
    var elsewhere: [(key: String, runner: String, startedAt: Date, phase: String?)] = []
}

protocol LiveSource: Sendable {
    /// The page's counts and the fleet's other jobs; `runningHere`: jobs this watcher runs now.
    func overview(runningHere: Int) -> LiveOverview
    /// `runner status --json`'s members (its `running` array is merged with this watcher's jobs).
    func status() -> [(key: String, value: JSONValue)]
    /// Queues the valid job file at `path` as `name`; returns what it was queued as.
    func queue(file path: String, name: String) async throws -> String
    /// As `runner cancel KEY`: 202, or 404 when nothing has the key.
    func cancel(key: String) async -> LiveServer.Response
}

/// The spool folder as a live page's source.
struct SpoolLiveSource: LiveSource {
    let spool: Spool
    let registry: KindRegistry

    func overview(runningHere: Int) -> LiveOverview {
        let status = SpoolStatus.read(spool)
        return LiveOverview(counts: [
            ("files queued", status.queued.count), ("files held", status.claimed.map(\.files.count).reduce(0, +)),
            ("jobs running", max(status.running.count, runningHere)),
            ("files done", status.doneCount), ("files failed", status.failedCount),
        ])
    }

    func status() -> [(key: String, value: JSONValue)] {
        guard case .object(let members) = SpoolStatus.read(spool).json else { return [] }
        return members
    }

    /// Into the inbox, on the blocking work's call lane (the spool's writes are synced).
    func queue(file path: String, name: String) async throws -> String {
        let spool = spool
        return try await BlockingWork.shared.lane(.calls).run { Result { try spool.submit(file: path) } }.get()
    }

    /// Reads and writes the spool's folders on the blocking work's call lane.
    func cancel(key: String) async -> LiveServer.Response {
        let source = self
        return await BlockingWork.shared.lane(.calls).run { source.cancelNow(key: key) }
    }

    private func cancelNow(key: String) -> LiveServer.Response {
        let running = spool.running(key: key)
        let waiting = spool.filesHolding(key: key, registry: registry)
        guard !running.isEmpty || !waiting.isEmpty else {
            return .json(404, .object([("error", .string("nothing with the key \(key) is running or waiting; no cancel request made"))]))
        }
        do {
            _ = try spool.requestCancel(key: key)
        } catch {
            return .json(500, .object([("error", .string("\(error)"))]))
        }
        return .json(202, .object([
            ("key", .string(key)), ("running", .bool(!running.isEmpty)), ("waitingFiles", .array(waiting.map { .string($0) })),
        ]))
    }
}
