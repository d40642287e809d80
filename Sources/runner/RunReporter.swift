import Foundation
import RunnerKit
import Synchronization

/// What `runner run` shows while jobs run and when they are done: `--json` lines as jobs end,
/// notices on stderr, a progress line on a terminal, and a table of results at the end.
final class RunReporter: RunObserver {
    private struct State {
        var finished = 0
        var topLevelFinished = 0
        var failed = 0
        var rows: [JobResult] = []
        var omittedRows = 0
        var lastDraw = ContinuousClock.now
        var progressShown = false
    }

    private let json: Bool
    private let progress: Bool
    private let started = ContinuousClock.now
    private let state = Mutex(State())
    /// Rows kept for the closing table; beyond it, only jobs that did not succeed are kept.
    private let rowLimit = 60

    private let total: Int

    /// `total`: the top-level jobs expected (children are counted as they come).
    init(json: Bool, total: Int = 0) {
        self.json = json
        self.total = total
        self.progress = !json && Console.stdoutIsTerminal
    }

    func jobNotice(_ job: JobDescriptor, message: String) {
        clearProgress()
        Console.err("runner: \(job.key): \(message)")
    }

    func problem(_ message: String) {
        clearProgress()
        Console.err("runner: \(message)")
    }

    func jobFinished(_ result: JobResult) {
        if json { Console.out(result.jsonLine) }
        let draw: String? = state.withLock { state in
            state.finished += 1
            if result.parent == nil { state.topLevelFinished += 1 }
            if !result.status.isSuccess && !(result.parent != nil && result.status.isAcceptableForChild) { state.failed += 1 }
            if state.rows.count < rowLimit || !result.status.isSuccess && state.rows.count < 4 * rowLimit {
                state.rows.append(result)
            } else {
                state.omittedRows += 1
            }
            guard progress, state.lastDraw.duration(to: .now) > .milliseconds(200) else { return nil }
            state.lastDraw = .now
            state.progressShown = true
            let elapsed = Self.seconds(started.duration(to: .now))
            let rate = Double(state.topLevelFinished) / max(elapsed, 0.001)
            var line = "\r\u{1B}[K  \(state.topLevelFinished) of \(total) jobs done"
            if state.finished > state.topLevelFinished { line += " (+\(state.finished - state.topLevelFinished) children)" }
            line += ", \(state.failed) not ok, \(String(format: "%.0f", rate)) jobs/s"
            if rate > 0, total > state.topLevelFinished {
                line += ", about \(Self.clock(Double(total - state.topLevelFinished) / rate)) left"
            }
            return line
        }
        if let draw { Console.outRaw(draw) }
    }

    private func clearProgress() {
        let shown = state.withLock { state -> Bool in
            defer { state.progressShown = false }
            return state.progressShown
        }
        if shown { Console.outRaw("\r\u{1B}[K") }
    }

    /// The closing table and summary (not in `--json` mode), and a line when the per-host cap
    /// or pacing held jobs back noticeably (on stderr in `--json` mode). When pacing did, the
    /// per-host line is left out: a job holds its host's slot while it waits for a token, so the
    /// slots' waits are the rate's doing, and more slots would not help.
    func printSummary(
        _ summary: RunSummary, store: OutputStore, runLog: RunLog, hostWaits: HostLimiter.Waits? = nil,
        paceWaits: HostPacer.Waits? = nil
    ) {
        clearProgress()
        let paceLine = paceWaits.flatMap { $0.isNoticeable ? Self.describe($0) : nil }
        let hostLine = paceLine ?? hostWaits.flatMap { $0.isNoticeable ? Self.describe($0) : nil }
        guard !json else {
            if let hostLine { Console.err("runner: \(hostLine)") }
            return
        }
        let (rows, omitted) = state.withLock { ($0.rows, $0.omittedRows) }
        var lines = [Self.format(["STATUS", "KEY", "HTTP", "BYTES", "MS", "NOTE"])]
        for result in rows {
            lines.append(Self.format([
                result.status.rawValue + (result.stale ? "*" : ""),
                Self.shorten(result.key, 44),
                result.httpStatus.map(String.init) ?? "-",
                result.bytes.map(String.init) ?? "-",
                String(result.durationMs),
                Self.note(result),
            ]))
        }
        if omitted > 0 { lines.append("  … and \(omitted) more (every record is in \(Self.relative(store.root))/results)") }
        Console.out(lines.joined(separator: "\n"))
        let counts = JobStatus.allCases.compactMap { status in summary.counts[status].map { "\($0) \(status.rawValue)" } }
        Console.out("\n\(summary.total) job\(summary.total == 1 ? "" : "s"): \(counts.joined(separator: ", ")). "
            + "Payloads and records in \(Self.relative(store.root))/, run log \(Self.relative(runLog.path)).")
        if rows.contains(where: \.stale) { Console.out("* stale: the job failed; output points at the last good payload.") }
        let slowest = summary.slowestFive.filter { $0.durationMs > 0 }
        if summary.total > 1, !slowest.isEmpty {
            Console.out("Slowest: " + slowest.map { "\(Self.shorten($0.key, 40)) \($0.durationMs) ms" }.joined(separator: ", "))
        }
        if let hostLine { Console.out(hostLine) }
    }

    /// "Jobs waited 41 s in all for a per-host slot (most for 127.0.0.1), 95% of their time at
    /// hosts: --per-host 8 held them back; raise --per-host to run more at once."
    static func describe(_ waits: HostLimiter.Waits) -> String {
        let host = waits.busiestHost.map { " (most for \($0.isEmpty ? "a URL without host" : $0))" } ?? ""
        let waited = seconds(waits.waited)
        let amount = waited < 10 ? String(format: "%.1f s", waited) : clock(waited)
        let cap = waits.busiestHostLimit.map { "the config's perHost \($0) for that host held them back; raise it" }
            ?? "--per-host \(waits.limit) held them back; raise --per-host"
        return "Jobs waited \(amount) in all for a per-host slot\(host), "
            + "\(Int((waits.share * 100).rounded()))% of their time at hosts: \(cap) to run more at once."
    }

    /// "Jobs waited 12 s in all for their turn at a paced host (most for api.example.org, 2
    /// requests/s); 1 host asked to wait (Retry-After)."
    static func describe(_ waits: HostPacer.Waits) -> String {
        let host = waits.busiestHost.map { name in
            let rate = waits.busiestHostRate.map { ", \(String(format: "%g", $0)) requests/s" } ?? ""
            return " (most for \(name.isEmpty ? "a URL without host" : name)\(rate))"
        } ?? ""
        let waited = seconds(waits.waited)
        let amount = waited < 10 ? String(format: "%.1f s", waited) : clock(waited)
        let pauses = waits.pauses == 0 ? "" : "; hosts asked \(waits.pauses) time\(waits.pauses == 1 ? "" : "s") to wait (Retry-After)"
        return "Jobs waited \(amount) in all for their turn at a paced host\(host)\(pauses)."
    }

    private static func seconds(_ duration: Duration) -> Double { duration.inSeconds }

    private static func clock(_ seconds: Double) -> String {
        let s = Int(seconds.rounded(.up))
        return s < 60 ? "\(s) s" : s < 3600 ? "\(s / 60) min \(s % 60) s" : "\(s / 3600) h \(s % 3600 / 60) min"
    }

    // MARK: - Formatting

    private static let widths = [12, 44, 5, 9, 6]

    private static func format(_ columns: [String]) -> String {
        var line = ""
        for (index, column) in columns.enumerated() {
            if index < widths.count {
                let pad = max(1, widths[index] - column.count + 1)
                line += index >= 2 && index <= 4
                    ? String(repeating: " ", count: pad - 1) + column + " "
                    : column + String(repeating: " ", count: pad)
            } else {
                line += column
            }
        }
        return line.trimmingCharacters(in: .whitespaces)
    }

    private static func note(_ result: JobResult) -> String {
        if let error = result.error { return error }
        return result.details.map { key, value in
            switch value {
            case .string(let s): return "\(key) \(s)"
            case .object(let members): return "\(key) " + members.map { "\($0.value.intValue ?? 0) \($0.key)" }.joined(separator: " ")
            default: return "\(key) \(JSONWriter.string(value))"
            }
        }.joined(separator: ", ")
    }

    private static func shorten(_ text: String, _ width: Int) -> String {
        text.count <= width ? text : "…" + text.suffix(width - 1)
    }

    static func relative(_ path: String) -> String {
        let cwd = FileManager.default.currentDirectoryPath
        if path.hasPrefix(cwd + "/") { return String(path.dropFirst(cwd.count + 1)) }
        return path
    }
}
