import Foundation
import Glibc
import Synchronization

// `runner watch` as one service, whichever feed it runs:
//
//   run(signals:) ─► the page started (--listen) ─► one task group:
//       the feed            runs its engine until a stop and its jobs' end
//       the signals         SIGINT, SIGTERM: the stop begins (the feed's grace on the engine's
//                           clock); SIGHUP: --events, --metrics and the token file opened anew
//       the metrics writer  every 10 s on the engine's clock
//   the feed's events ─► systemd (READY, WATCHDOG, STATUS), metrics, the log, the page's stream
//   the feed's end ─► the group's other tasks cancelled ─► hooks left finished ─► the last
//       metrics ─► the page stopped ─► "stopped"
//
// The signals come as a stream: the command line makes it from the process's handler, installed
// before anything else so a signal during the start is not lost; a test yields them itself.

/// A feed, the live page, the metrics, the service manager's notices and the signals, run as
/// one: what `runner watch` runs, with the spool's feed or a queue's.
package final class Watcher: Sendable {
    /// The live page and API (`--listen`) of a watcher.
    package struct Page: Sendable {
        package var server: LiveServer
        /// The address the page was asked to listen on, as the log names it.
        package var host: String
        /// The file the token was read from (`--listen-token`), read again at SIGHUP.
        package var tokenFile: String?
        /// Reads a token file, or throws saying why not.
        package var readToken: @Sendable (String) throws -> String

        package init(server: LiveServer, host: String, tokenFile: String?, readToken: @escaping @Sendable (String) throws -> String) {
            self.server = server
            self.host = host
            self.tokenFile = tokenFile
            self.readToken = readToken
        }
    }

    /// What a watcher runs beside its feed, and where it says what happens.
    package struct Configuration: Sendable {
        package var service: WatchService
        package var page: Page?
        /// The `--events` file, opened anew at SIGHUP; the feed's schedule ticks go there too.
        package var events: EventStream?
        /// Runs once the feed ended: the hooks of jobs that ended as it stopped.
        package var afterFeed: (@Sendable () async -> Void)?
        /// Work that runs beside the feed until it ends (cancelled then): a page's snapshot of
        /// the queue renewed.
        package var alongside: [@Sendable () async -> Void] = []
        /// The output folder, as the first line names it.
        package var out: String
        /// The clock the metrics are written on (the engine's).
        package var clock: any Clock<Duration> = ContinuousClock()
        /// Says a line on the watcher's log (standard error for the command line).
        package var say: @Sendable (String) -> Void

        package init(service: WatchService, out: String, say: @escaping @Sendable (String) -> Void) {
            self.service = service
            self.out = out
            self.say = say
        }
    }

    package let configuration: Configuration
    /// The feed this watcher runs.
    package let feed: any WatchFeed

    /// A watcher of the feed `makeFeed` makes, given where the feed tells what happens.
    /// - Throws: what `makeFeed` throws.
    package init<Failure: Error>(
        configuration: Configuration, makeFeed: (@escaping @Sendable (WatchEvent) -> Void) throws(Failure) -> any WatchFeed
    ) throws(Failure) {
        self.configuration = configuration
        let relay = EventRelay()
        self.feed = try makeFeed { event in relay.watcher?.handle(event) }
        relay.watcher = self
    }

    /// The engine the feed runs on.
    package var engine: JobEngine { feed.engine }

    /// Runs the watcher until a stop signal ends its feed: 0 when it stopped, 1 when the feed
    /// failed, 2 when the page could not be served.
    package func run<Signals: AsyncSequence & Sendable>(signals: Signals) async -> Int32
    where Signals.Element == Int32, Signals.Failure == Never {
        let (service, say) = (configuration.service, configuration.say)
        if let page = configuration.page {
            do {
                try page.server.start()
            } catch {
                say("Error: --listen: \(error)")
                return 2
            }
            say("runner: live page and API at http://\(LiveServer.display(host: page.host, port: page.server.port))/")
        }
        defer { configuration.page?.server.stop() }
        if case let queue as QueueFeed = feed { service.metrics.follow(running: { queue.running }) }
        let failure: (any Error)? = await withTaskGroup(of: Ended.self) { group in
            group.addTask {
                for await number in signals { self.heard(number) }
                return .beside
            }
            if service.metricsPath != nil {
                let clock = configuration.clock
                group.addTask {
                    repeat { self.writeMetrics() } while (try? await clock.sleep(for: WatchService.metricsInterval)) != nil
                    return .beside
                }
            }
            for work in configuration.alongside {
                group.addTask {
                    await work()
                    return .beside
                }
            }
            let feed = self.feed
            group.addTask {
                do {
                    try await feed.run()
                    return .feed(nil)
                } catch {
                    return .feed(error)
                }
            }
            // The feed's end is the watcher's: the signals, the metrics writer and the work
            // beside it end with it. One of those ending first (a caller's signals that run out)
            // leaves the feed running.
            while let ended = await group.next() {
                guard case .feed(let failure) = ended else { continue }
                group.cancelAll()
                return failure
            }
            return nil
        }
        if let failure {
            say("Error: \(failure)")
            return 1
        }
        await configuration.afterFeed?()
        configuration.service.record(feed.status)
        writeMetrics()
        say("runner: stopped")
        return 0
    }

    /// Which of the group's tasks ended: the feed (with its failure) or one beside it.
    private enum Ended {
        case feed((any Error)?)
        case beside
    }

    // MARK: - Signals

    /// SIGINT, SIGTERM: the stop begins (again at each); SIGHUP: files opened anew.
    private func heard(_ number: Int32) {
        switch number {
        case SIGHUP:
            reopen()
        default:
            configuration.service.stopping(feed.stopNotice)
            configuration.say("runner: \(Self.signalName(number)): \(feed.stopNotice); running jobs have \(feed.grace) to end")
            feed.shutdown(grace: nil)
        }
    }

    /// The files the watcher writes and reads, opened anew as logrotate's postrotate asks
    /// (`--events`, `--metrics`, the `--listen-token` file), said in one line: a file not
    /// opened anew is said with why, never as reopened. The watcher goes on.
    private func reopen() {
        var reopened: [String] = []
        var notes: [String] = []
        if let events = configuration.events {
            switch events.reopen() {
            case .reopened: reopened.append("--events \(events.path)")
            case .waitingForReader: notes.append("--events \(events.path) has no reader now; opened anew when one comes")
            case .pending: notes.append("--events \(events.path) waits for its reader to take what it is behind; opened anew then")
            case .failed(let reason): notes.append("--events not reopened: \(reason)")
            }
        }
        if let path = configuration.service.metricsPath {
            writeMetrics()
            reopened.append("--metrics \(path)")
        }
        if let page = configuration.page, let path = page.tokenFile {
            do {
                _ = page.server.setToken(try page.readToken(path))
                reopened.append("--listen-token \(path)")
            } catch {
                configuration.say("runner: SIGHUP: \(error); the token read before stands")
            }
        }
        let said = (reopened.isEmpty ? (notes.isEmpty ? ["no file to reopen"] : []) : ["reopened " + reopened.joined(separator: ", ")]) + notes
        configuration.say("runner: SIGHUP: " + said.joined(separator: "; ") + "; still watching")
    }

    static func signalName(_ number: Int32) -> String {
        switch number {
        case SIGINT: "SIGINT"
        case SIGHUP: "SIGHUP"
        default: "SIGTERM"
        }
    }

    private func writeMetrics() {
        configuration.service.writeMetrics { configuration.say("runner: \($0)") }
    }

    // MARK: - The feed's events

    /// What the feed says, told to the service manager, the metrics, the log and the page.
    private func handle(_ event: WatchEvent) {
        let (service, say, source) = (configuration.service, configuration.say, feed.source)
        func line(_ text: String) { say(Printable.escaped(text)) }
        switch event {
        case .started(let id, let recovered):
            if feed is SpoolFeed {
                say("runner: watching \(Self.relative(source)) (watcher \(id)); results in \(Self.relative(configuration.out))/")
            } else {
                say("runner: watching \(source); results in \(Self.relative(configuration.out))/")
            }
            if !recovered.isEmpty {
                say("runner: put back in line \(recovered.count) file(s) a watcher left in active/: \(recovered.prefix(10).joined(separator: ", "))")
            }
        case .ready(let status):
            service.ready(status, source: source)
        case .heartbeat(let status):
            service.heartbeat(status, source: source)
        case .claimed:
            break
        case .finished(let report):
            say(Self.line(report))
        case .fileEnded(let name, let counts):
            let tally = JobStatus.allCases.compactMap { status in counts[status].map { "\($0) \(status.rawValue)" } }
            line("runner: \(name): its jobs ended; " + tally.joined(separator: ", "))
        case .cancelRequested(let key, let cancelledRunning):
            if feed is SpoolFeed {
                line("runner: cancel \(key): " + (cancelledRunning ? "the running task is cancelled" : "no task with that key is running; waiting jobs with it will not run"))
            } else if cancelledRunning {
                line("runner: cancel \(key): the running task is cancelled")
            }
        case .problem(let message):
            if feed is SpoolFeed { say("runner: \(message)") } else { line("runner: \(message)") }
        case .fleetFinished(let key, let kind, let status, let runner):
            // The page's event stream carries the fleet's ends, each naming its watcher.
            configuration.page?.server.take(EventLines.line("finished", [
                ("key", .string(key)), ("kind", .string(kind)), ("status", .string(status)), ("runner", .string(runner)),
            ]))
        case .scheduleFired(let fired):
            line("runner: " + fired.line)
            if !fired.batch.isEmpty {
                // The page's stream and the --events file both say which batch a tick made.
                let event = EventLines.line("scheduled", [
                    ("schedule", .string(fired.schedule)), ("tick", .string(CronExpression.iso8601(fired.tick, in: TimeZone(identifier: "UTC")!))),
                    ("batch", .string(fired.batch)), ("jobs", JSONValue(fired.jobs)), ("covers", JSONValue(fired.covers)),
                    ("runner", .string((feed as? QueueFeed)?.runner ?? "")),
                ])
                configuration.page?.server.take(event)
                configuration.events?.take(event)
            }
        }
    }

    /// A spool file's end, as the log says it.
    static func line(_ report: SpoolFeed.FileReport) -> String {
        let counts = JobStatus.allCases.compactMap { status in report.counts[status].map { "\($0) \(status.rawValue)" } }
        var line = "runner: \(report.name): "
        switch report.outcome {
        case .done: line += "done"
        case .failed: line += "failed"
        case .returned: line += "back in inbox (not finished before shutdown)"
        }
        if report.finalName != report.name { line += " as \(report.finalName)" }
        if !counts.isEmpty { line += "; " + counts.joined(separator: ", ") }
        if let latency = report.startLatency {
            line += String(format: "; first job started %.2f ms after arrival", latency.inSeconds * 1000)
        }
        if report.outcome == .failed, let reason = report.reason?.split(separator: "\n").first { line += "\n  \(reason)" }
        return line
    }

    /// `path` from the working folder when it is inside it.
    static func relative(_ path: String) -> String {
        let cwd = FileManager.default.currentDirectoryPath
        return path.hasPrefix(cwd + "/") ? String(path.dropFirst(cwd.count + 1)) : path
    }
}

/// Hands the feed's events to its watcher, which exists only once the feed does (held weakly:
/// the watcher holds the feed, which holds this).
private final class EventRelay: Sendable {
    private struct Weak: @unchecked Sendable {  // read and written under the mutex only
        weak var watcher: Watcher?
    }
    private let held = Mutex(Weak())

    var watcher: Watcher? {
        get { held.withLock { $0.watcher } }
        set { held.withLock { $0.watcher = newValue } }
    }
}
